//! A fan-out in the browser: while its children work, the runs table and
//! the run's header badge it as waiting for children (not for a person);
//! once joined, its timeline draws the children step as one bar from the
//! spawn to the join, each child as a bar on the same clock inside it, and
//! the steps table counts the children's time as the step's.

use std::path::Path;

use super::{browser, browser_case, runtime, screenshot, Console, WAIT};
use crate::support::Kind;

/// Children that work until `gate` exists, then a little more.
fn child_crew(gate: &Path) -> String {
    format!(
        "name = \"child\"\nversion = \"1\"\n[[agents]]\nrole = \"work\"\nkind = \"command\"\n\
         command = [\"sh\", \"-c\", '''cat > /dev/null; while [ ! -f '{}' ]; do sleep 0.05; done; \
         sleep 0.5; echo '{{}}' ''']\n",
        gate.display()
    )
}

/// A fan-out of three children, then a template step.
const FAN: &str = "name = \"fan\"\nversion = \"1\"\n[[agents]]\nrole = \"spread\"\n\
    kind = \"children\"\ncrew = \"child.toml\"\nover = \"input.items\"\n\
    [[agents]]\nrole = \"sum\"\nkind = \"template\"\ntemplate = \"done\"\n";

#[test]
fn a_fan_outs_children_step_spans_spawn_to_join_with_its_children_on_the_clock() {
    let Some(case) = browser_case(
        "a_fan_outs_children_step_spans_spawn_to_join_with_its_children_on_the_clock",
        Kind::Sqlite,
    ) else {
        return;
    };
    let gate = case.path("gate");
    let crews = [("child", child_crew(&gate)), ("fan", FAN.to_owned())];
    let console = Console::start(&case, &crews, "4", false);
    let id = console.submit(&case, "fan", r#"{"items": ["a", "b", "c"]}"#, false);
    runtime().block_on(async {
        let b = browser().await;
        // The runs table badges it as waiting for its children (the page
        // refreshes itself), apart from a wait for a person.
        b.goto(&console.page("/")).await.unwrap();
        let badge = b
            .wait_for_text(
                "table.runs span.badge.children-working",
                "still working",
                WAIT,
            )
            .await
            .unwrap();
        assert!(badge.contains("waiting for 3 children"), "{badge}");
        let look = "return getComputedStyle(document.querySelector(arguments[0])).backgroundColor;";
        let children = b
            .execute(look, vec!["span.badge.children-working".into()])
            .await
            .unwrap();
        let person = b
            .execute(look, vec!["table.runs span.badge.waiting".into()])
            .await
            .unwrap();
        assert_ne!(
            children, person,
            "a wait for children looks like one for a person"
        );
        b.goto(&console.page(&format!("/runs/{id}"))).await.unwrap();
        b.wait_for_text(
            "dl.header span.badge.children-working",
            "still working",
            WAIT,
        )
        .await
        .unwrap();
        std::fs::write(&gate, "open").unwrap();
        // The page follows the run to its end.
        super::header_says(&b, &["2 of 2 steps", "succeeded"]).await;
        let geometry = b
            .execute(
                "const box = (q) => [...document.querySelectorAll(q)].map((r) => \
                   [r.x.baseVal.value, r.width.baseVal.value]); \
                 return [box('svg.timeline g.bar.children rect'), \
                         box('svg.timeline g.bar.child rect'), \
                         box('svg.timeline g.bar.succeeded rect')];",
                vec![],
            )
            .await
            .unwrap();
        let spans = |i: usize| -> Vec<(f64, f64)> {
            geometry[i]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| (p[0].as_f64().unwrap(), p[1].as_f64().unwrap()))
                .collect()
        };
        let (wait, kids, steps) = (spans(0), spans(1), spans(2));
        assert_eq!(wait.len(), 1, "one wait for children: {geometry}");
        let (from, to) = (wait[0].0, wait[0].0 + wait[0].1);
        // Spawn to join: the children's half second at least, inside the
        // step's own bar, which runs from before the spawn to past the join.
        assert!(
            wait[0].1 > 100.0,
            "the wait is drawn at its length: {geometry}"
        );
        let step = steps[0];
        assert!(
            step.0 <= from + 0.5 && step.0 + step.1 >= to - 0.5,
            "the step's bar holds the wait: {geometry}"
        );
        // Each child on the run's clock: from the spawn, ending inside the
        // wait for them, not squares at the axis' left edge.
        assert_eq!(kids.len(), 3, "{geometry}");
        // The join came when the last child ended: it is written in that
        // child's last transaction, so the two times differ by the
        // transaction's own length, a few milliseconds on a loaded machine
        // (6 px once in CI, beside two browser tests and clippy).
        let last = kids.iter().map(|(x, w)| x + w).fold(0.0, f64::max);
        assert!(
            (last - to).abs() < 10.0,
            "the join is the last child's end: {geometry}"
        );
        for (x, width) in &kids {
            assert!(
                (x - from).abs() < 3.0,
                "a child starts at the spawn: {geometry}"
            );
            assert!(
                x + width <= to + 1.0,
                "a child ends by the join: {geometry}"
            );
            assert!(
                *width > (to - from) / 2.0,
                "a child's bar is its run: {geometry}"
            );
        }
        // The steps table: the children's time is the step's.
        let duration = b
            .text("table.steps tbody tr:first-child td:nth-child(5)")
            .await
            .unwrap();
        assert!(
            duration.ends_with(" s"),
            "the children step took {duration}"
        );
        let legend = b.text("ul.legend").await.unwrap();
        assert!(legend.contains("waiting for children"), "{legend}");
        b.execute(
            "document.querySelector('svg.timeline').scrollIntoView({block: 'center'}); return null;",
            vec![],
        )
        .await
        .unwrap();
        screenshot(&b, "console-fanout").await;
        super::assert_fits(&b, "a fan-out's page").await;
    });
}
