//! Budgets: how much of a model a run may spend, counted from what its
//! journal holds. A crew's `[budget]` table gives the default, a submit's
//! `--budget` (or `budget` in the API) overrides it per limit, and an
//! operator raises it when continuing a run that reached one. Spending is
//! read from the journal's `turn_end` items (every finished model response
//! of every step and attempt of the run): an item is written once and never
//! replayed, so a resumed or taken-over run never counts a call twice. A
//! response cut off mid-stream (no `turn_end`) counts its estimate, from
//! its failed `model_called` event's `cut_tokens`.

use serde::{Deserialize, Serialize};

use crate::meter::price::Usd;

/// Limits on a run's model use; an absent limit is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Input plus output tokens of every model call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Input tokens alone (a call whose input would pass it is not made).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Output tokens alone (no call is made once they are spent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Model calls (finished responses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_calls: Option<u64>,
    /// Tool executions (their `tool_executed` events, each written once
    /// with the result; a tool the budget refuses is not executed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<u64>,
    /// Seconds since the run was submitted (the database clock), checked
    /// before each step and each model call: a step or call that starts
    /// later is not started. A step already running is not stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_time: Option<u64>,
    /// Dollars of model calls, priced by the price table of the process
    /// that made each call (`crate::meter::price`). A run with this limit makes
    /// no call to a model the table does not price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<Usd>,
}

/// What a run has spent so far (from its journal). Its serde form is part
/// of `cairn runs show --json` (`spent`, for a run with a budget).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spent {
    pub tokens: u64,
    /// Of `tokens`, the input and the output.
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    pub model_calls: u64,
    /// Tools executed (`tool_executed` events).
    pub tool_calls: u64,
    /// Seconds since the run was submitted.
    #[serde(default)]
    pub wall_time: u64,
    /// Dollars of the priced model calls (each priced when it finished).
    #[serde(default)]
    pub cost_usd: Usd,
}

/// What a child run's model call asks of its ancestors' budgets before it
/// is made (`BudgetStore::reserve_budget`). A run's budget limits the run and
/// its descendants together: each call of a descendant holds its estimate
/// (input and `max_tokens`) against every budgeted ancestor until it ends,
/// so children in flight at once cannot pass the budget together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BudgetAsk {
    /// The call's input, estimated (4 bytes a token).
    pub input_tokens: u64,
    /// What the call holds while it runs: its input and its `max_tokens`.
    pub tokens: u64,
    /// What the input costs, and what the whole call may cost, where the
    /// calling process prices the model.
    pub input_cost: Usd,
    pub cost: Usd,
    /// Whether the calling process prices the model (a dollar budget
    /// lets no unpriced call through).
    pub priced: bool,
}

/// The key a run waiting for room in the budget of the tree rooted at
/// `root` is deferred on.
pub fn budget_key(root: crate::RunId) -> String {
    format!("budget={root}")
}

/// An ancestor's answer to a [`BudgetAsk`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeAnswer {
    /// No ancestor has a budget: the call may be made, holding nothing.
    Free,
    /// The call may be made; it holds its estimate until released.
    Go,
    /// What the tree spent leaves room, but not beside the calls other
    /// runs of the tree hold now: ask again once one ends (a run deferred
    /// on `key`, [`budget_key`], is woken when a hold of its tree ends).
    Wait { why: String, key: String },
    /// The budget is spent for this call whatever the others do.
    Refused { why: String },
}

/// A budget flag that does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "budget `{text}`: {why} (write tokens=N, input_tokens=N, output_tokens=N, \
     model_calls=N, tool_calls=N, wall_time=N \
     (seconds, or with s, m, h) or cost_usd=D (dollars, as 2.50); +N to raise)"
)]
pub struct BadBudget {
    pub text: String,
    pub why: String,
}

impl Budget {
    /// The limits a run works under: its own over its crew's; none if
    /// neither limits anything.
    pub fn in_force(own: Option<Budget>, crew: Option<Budget>) -> Option<Budget> {
        Some(own.unwrap_or_default().over(crew.unwrap_or_default())).filter(|b| !b.is_empty())
    }

    /// Whether it limits nothing.
    pub fn is_empty(&self) -> bool {
        *self == Budget::default()
    }

    /// `self`'s limits where set, `under`'s elsewhere (a run's own budget
    /// over its crew's).
    pub fn over(self, under: Budget) -> Budget {
        Budget {
            tokens: self.tokens.or(under.tokens),
            input_tokens: self.input_tokens.or(under.input_tokens),
            output_tokens: self.output_tokens.or(under.output_tokens),
            model_calls: self.model_calls.or(under.model_calls),
            tool_calls: self.tool_calls.or(under.tool_calls),
            wall_time: self.wall_time.or(under.wall_time),
            cost_usd: self.cost_usd.or(under.cost_usd),
        }
    }

    /// Each limit of `self` raised by `by`'s (a limit `self` lacks is not
    /// raised: there is nothing to raise).
    pub fn raised(self, by: Budget) -> Budget {
        let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.saturating_add(b)),
            (a, _) => a,
        };
        Budget {
            tokens: add(self.tokens, by.tokens),
            input_tokens: add(self.input_tokens, by.input_tokens),
            output_tokens: add(self.output_tokens, by.output_tokens),
            model_calls: add(self.model_calls, by.model_calls),
            tool_calls: add(self.tool_calls, by.tool_calls),
            wall_time: add(self.wall_time, by.wall_time),
            cost_usd: match (self.cost_usd, by.cost_usd) {
                (Some(a), Some(b)) => Some(a.saturating_add(b)),
                (a, _) => a,
            },
        }
    }

    /// Reads flags `tokens=N`, `model_calls=N` and `tool_calls=N` into one
    /// budget. With
    /// `raise`, each must be `+N` (a raise); without, a plain `N`.
    pub fn parse<'a>(
        flags: impl IntoIterator<Item = &'a str>,
        raise: bool,
    ) -> Result<Budget, BadBudget> {
        let mut budget = Budget::default();
        for text in flags {
            let bad = |why: &str| BadBudget {
                text: text.to_owned(),
                why: why.to_owned(),
            };
            let (name, value) = text.split_once('=').ok_or_else(|| bad("no `=`"))?;
            let value = match (raise, value.trim().strip_prefix('+')) {
                (true, Some(v)) => v,
                (true, None) => return Err(bad("a raise is written +N")),
                (false, Some(_)) => return Err(bad("+N only raises, with `runs continue`")),
                (false, None) => value.trim(),
            };
            let name = name.trim();
            if name == "cost_usd" {
                let usd = Usd::parse(value).ok_or_else(|| bad("not an amount of dollars"))?;
                budget.cost_usd = Some(usd);
                continue;
            }
            let n: u64 = match name {
                "wall_time" => seconds(value),
                _ => value.parse().ok(),
            }
            .ok_or_else(|| bad("not a whole number"))?;
            let slot = match name {
                "tokens" => &mut budget.tokens,
                "input_tokens" => &mut budget.input_tokens,
                "output_tokens" => &mut budget.output_tokens,
                "model_calls" => &mut budget.model_calls,
                "tool_calls" => &mut budget.tool_calls,
                "wall_time" => &mut budget.wall_time,
                _ => return Err(bad("unknown limit")),
            };
            *slot = Some(n);
        }
        Ok(budget)
    }

    /// The limits `before` was under 80 % of and `after` reaches (a soft
    /// threshold: `budget_warning`), each with its value and what is spent
    /// after: counts as whole numbers, `cost_usd` in dollars.
    pub fn crossed(&self, before: Spent, after: Spent) -> Vec<Crossing> {
        use BudgetLimit as L;
        let cost = |usd: Usd| usd.0;
        let limits = [
            (L::Tokens, self.tokens, before.tokens, after.tokens),
            (
                L::InputTokens,
                self.input_tokens,
                before.input_tokens,
                after.input_tokens,
            ),
            (
                L::OutputTokens,
                self.output_tokens,
                before.output_tokens,
                after.output_tokens,
            ),
            (
                L::ModelCalls,
                self.model_calls,
                before.model_calls,
                after.model_calls,
            ),
            (
                L::ToolCalls,
                self.tool_calls,
                before.tool_calls,
                after.tool_calls,
            ),
            (
                L::CostUsd,
                self.cost_usd.map(cost),
                cost(before.cost_usd),
                cost(after.cost_usd),
            ),
        ];
        limits
            .into_iter()
            .filter_map(|(limit, value, was, now)| {
                let value = value?;
                // 80 %, in whole units: was below it, now at or past it.
                let soft = value.saturating_mul(4).div_ceil(5);
                let amount = |n: u64| match limit {
                    L::CostUsd => Amount::Dollars(Usd(n)),
                    _ => Amount::Count(n),
                };
                (was < soft && now >= soft).then(|| Crossing {
                    limit,
                    budget: amount(value),
                    spent: amount(now),
                })
            })
            .collect()
    }

    /// Why the next tool must not be executed: the run's tool calls are
    /// spent.
    pub fn refuses_tool(&self, spent: Spent) -> Option<String> {
        let limit = self.tool_calls.filter(|l| spent.tool_calls >= *l)?;
        Some(format!(
            "the run's budget of {limit} tool calls is spent ({} executed)",
            spent.tool_calls
        ))
    }

    /// Why the next step must not start: the run's wall time is spent.
    pub fn refuses_step(&self, spent: Spent) -> Option<String> {
        let limit = self.wall_time.filter(|l| spent.wall_time >= *l)?;
        Some(format!(
            "the run's wall time of {limit} s is spent ({} s since it was submitted)",
            spent.wall_time
        ))
    }

    /// A [`BudgetAsk`] against this budget of a run's tree, given what the
    /// tree `spent` and what the calls of its other runs `held` now
    /// (tokens, calls and cost; wall time is each run's own).
    pub fn answer(&self, spent: Spent, held: Spent, ask: &BudgetAsk) -> TreeAnswer {
        let limits = Budget {
            wall_time: None,
            ..*self
        };
        if let (Some(limit), false) = (limits.cost_usd, ask.priced) {
            let why = format!("its budget of {limit} cannot be kept: the call is not priced");
            return TreeAnswer::Refused { why };
        }
        if let Some(why) = limits.refuses(spent, ask.input_tokens, ask.input_cost) {
            return TreeAnswer::Refused { why };
        }
        let with_held = Spent {
            tokens: spent.tokens.saturating_add(held.tokens),
            model_calls: spent.model_calls.saturating_add(held.model_calls),
            cost_usd: spent.cost_usd.saturating_add(held.cost_usd),
            ..spent
        };
        match limits.refuses(with_held, ask.input_tokens, ask.input_cost) {
            Some(why) => TreeAnswer::Wait {
                why,
                key: String::new(),
            },
            None => TreeAnswer::Go,
        }
    }

    /// What was spent of each limit this budget sets, for people:
    /// `tokens 360 of 500, model calls 3 of 3, cost $0.006000 of $1.000000`.
    pub fn against(&self, spent: &Spent) -> String {
        let limits = [
            ("tokens", spent.tokens, self.tokens),
            ("input tokens", spent.input_tokens, self.input_tokens),
            ("output tokens", spent.output_tokens, self.output_tokens),
            ("model calls", spent.model_calls, self.model_calls),
            ("tool calls", spent.tool_calls, self.tool_calls),
            ("seconds", spent.wall_time, self.wall_time),
        ];
        let mut parts: Vec<String> = limits
            .iter()
            .filter_map(|(name, used, limit)| limit.map(|l| format!("{name} {used} of {l}")))
            .collect();
        if let Some(limit) = self.cost_usd {
            parts.push(format!("cost {} of {limit}", spent.cost_usd));
        }
        parts.join(", ")
    }

    /// Why a program (a `command` step, which may report tokens but
    /// cannot say beforehand) must not start: the run's tokens or dollars
    /// are spent.
    pub fn refuses_program(&self, spent: Spent) -> Option<String> {
        let counts = [
            ("tokens", self.tokens, spent.tokens),
            ("input tokens", self.input_tokens, spent.input_tokens),
            ("output tokens", self.output_tokens, spent.output_tokens),
        ];
        for (name, limit, used) in counts {
            if let Some(limit) = limit.filter(|l| used >= *l) {
                return Some(format!(
                    "the run's budget of {limit} {name} is spent ({used} spent)"
                ));
            }
        }
        let limit = self.cost_usd.filter(|l| spent.cost_usd >= *l)?;
        Some(format!(
            "the run's budget of {limit} is spent ({} spent)",
            spent.cost_usd
        ))
    }

    /// Why the next model call must not be made: a limit reached, or one the
    /// call would pass (`estimate`: its input's tokens; `cost`: what that
    /// input costs).
    pub fn refuses(&self, spent: Spent, estimate: u64, cost: Usd) -> Option<String> {
        if let Some(why) = self.refuses_step(spent) {
            return Some(why);
        }
        if let Some(limit) = self.cost_usd {
            if spent.cost_usd.saturating_add(cost) > limit {
                return Some(format!(
                    "the run's budget of {limit} would be passed: {} spent, the next call's \
                     input costs about {cost}",
                    spent.cost_usd
                ));
            }
        }
        if let Some(limit) = self.model_calls.filter(|l| spent.model_calls >= *l) {
            return Some(format!(
                "the run's budget of {limit} model calls is spent ({} made)",
                spent.model_calls
            ));
        }
        if let Some(limit) = self.input_tokens {
            if spent.input_tokens.saturating_add(estimate) > limit {
                return Some(format!(
                    "the run's budget of {limit} input tokens would be passed: {} spent, the \
                     next call sends about {estimate}",
                    spent.input_tokens
                ));
            }
        }
        if let Some(limit) = self.output_tokens.filter(|l| spent.output_tokens >= *l) {
            return Some(format!(
                "the run's budget of {limit} output tokens is spent ({} spent)",
                spent.output_tokens
            ));
        }
        let limit = self.tokens?;
        (spent.tokens.saturating_add(estimate) > limit).then(|| {
            format!(
                "the run's budget of {limit} tokens would be passed: {} spent, the next call \
                 sends about {estimate}",
                spent.tokens
            )
        })
    }
}

/// Seconds from `30`, `45s`, `30m` or `2h`.
fn seconds(text: &str) -> Option<u64> {
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, ""),
    };
    let n: u64 = digits.parse().ok()?;
    let per = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => return None,
    };
    n.checked_mul(per)
}

/// A soft threshold a run's spending crossed ([`Budget::crossed`]): what a
/// `budget_warning` records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crossing {
    pub limit: BudgetLimit,
    /// The limit's value, and what is spent of it now.
    pub budget: Amount,
    pub spent: Amount,
}

/// A limit a `budget_warning` names (`Budget::crossed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetLimit {
    Tokens,
    InputTokens,
    OutputTokens,
    ModelCalls,
    ToolCalls,
    CostUsd,
}

/// An amount of a limit: a whole count, or dollars for `cost_usd`
/// (written as a JSON float, which is how it is told apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Amount {
    Count(u64),
    Dollars(Usd),
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A budget of `tokens` tokens and `model_calls` model calls, no other limit.
    fn tokens_and_calls(tokens: u64, model_calls: u64) -> Budget {
        Budget {
            tokens: Some(tokens),
            model_calls: Some(model_calls),
            ..Budget::default()
        }
    }

    /// What a tree spent: `tokens` over `model_calls` calls, nothing else.
    fn spent(tokens: u64, model_calls: u64) -> Spent {
        Spent {
            tokens,
            model_calls,
            ..Spent::default()
        }
    }

    #[test]
    fn flags_read_into_a_budget_or_are_refused_naming_the_flag() {
        let b = Budget::parse(["tokens=5000", "model_calls=3", "tool_calls=4"], false).unwrap();
        assert_eq!((b.tokens, b.model_calls), (Some(5000), Some(3)));
        assert_eq!(b.tool_calls, Some(4));
        let r = Budget::parse(["tokens=+100"], true).unwrap();
        assert_eq!(r.tokens, Some(100));
        for (flag, raise) in [
            ("tokens", false),
            ("tokens=+5", false),
            ("tokens=5", true),
            ("cost=5", false),
            ("tokens=-5", false),
            ("tokens=lots", false),
        ] {
            let e = Budget::parse([flag], raise).unwrap_err();
            assert!(e.to_string().contains(flag), "{e}");
        }
    }

    #[test]
    fn wall_time_reads_seconds_minutes_or_hours_and_stops_the_next_step() {
        for (flag, secs) in [
            ("wall_time=90", 90),
            ("wall_time=45s", 45),
            ("wall_time=30m", 1800),
            ("wall_time=2h", 7200),
        ] {
            assert_eq!(
                Budget::parse([flag], false).unwrap().wall_time,
                Some(secs),
                "{flag}"
            );
        }
        for flag in ["wall_time=2d", "wall_time=h", "wall_time=1.5h"] {
            let e = Budget::parse([flag], false).unwrap_err();
            assert!(e.to_string().contains(flag), "{e}");
        }
        let b = Budget::parse(["wall_time=60"], false).unwrap();
        let at = |secs| Spent {
            wall_time: secs,
            ..Spent::default()
        };
        assert_eq!(b.refuses_step(at(59)), None);
        let why = b.refuses_step(at(60)).unwrap();
        assert!(why.contains("wall time of 60 s"), "{why}");
        assert!(
            b.refuses(at(61), 0, Usd(0)).is_some(),
            "a model call is refused too"
        );
        assert_eq!(Budget::default().refuses_step(at(1_000_000)), None);
    }

    #[test]
    fn a_run_budget_overrides_its_crew_per_limit_and_a_raise_adds() {
        let crew = tokens_and_calls(1000, 10);
        let run = Budget {
            tokens: Some(50),
            model_calls: None,
            tool_calls: Some(4),
            wall_time: None,
            ..Budget::default()
        };
        let both = run.over(crew);
        assert_eq!((both.tokens, both.model_calls), (Some(50), Some(10)));
        assert_eq!(both.tool_calls, Some(4));
        let raised = both.raised(Budget::parse(["tokens=+25", "tool_calls=+1"], true).unwrap());
        assert_eq!((raised.tokens, raised.model_calls), (Some(75), Some(10)));
        assert_eq!(raised.tool_calls, Some(5));
    }

    #[test]
    fn a_call_is_refused_when_it_could_pass_a_limit() {
        let b = Budget {
            tokens: Some(1000),
            model_calls: Some(3),
            tool_calls: Some(2),
            wall_time: None,
            ..Budget::default()
        };
        assert_eq!(b.refuses(spent(400, 2), 600, Usd(0)), None);
        assert!(b
            .refuses(spent(401, 2), 600, Usd(0))
            .unwrap()
            .contains("1000 tokens"));
        assert!(b
            .refuses(spent(0, 3), 1, Usd(0))
            .unwrap()
            .contains("3 model calls"));
        assert_eq!(
            Budget::default().refuses(spent(u64::MAX, u64::MAX), 1, Usd(0)),
            None
        );
        let tools = |n| Spent {
            tool_calls: n,
            ..Spent::default()
        };
        assert_eq!(b.refuses_tool(tools(1)), None);
        assert!(b.refuses_tool(tools(2)).unwrap().contains("2 tool calls"));
        assert_eq!(
            b.refuses(tools(99), 1, Usd(0)),
            None,
            "tools do not limit models"
        );
        assert_eq!(Budget::default().refuses_tool(tools(u64::MAX)), None);
    }

    #[test]
    fn a_cost_limit_reads_in_dollars_refuses_a_call_that_would_pass_it_and_warns_in_dollars() {
        let b = Budget::parse(["cost_usd=2.50"], false).unwrap();
        assert_eq!(b.cost_usd, Some(Usd(2_500_000_000)));
        let raised = b.raised(Budget::parse(["cost_usd=+0.5"], true).unwrap());
        assert_eq!(raised.cost_usd, Some(Usd(3_000_000_000)));
        assert!(Budget::parse(["cost_usd=2,5"], false).is_err());
        let spent = |dollars: f64| Spent {
            cost_usd: Usd::from_dollars(dollars).unwrap(),
            ..Spent::default()
        };
        assert_eq!(b.refuses(spent(2.0), 0, Usd::parse("0.5").unwrap()), None);
        let why = b
            .refuses(spent(2.0), 0, Usd::parse("0.6").unwrap())
            .unwrap();
        assert!(why.contains("$2.500000"), "{why}");
        assert_eq!(
            b.crossed(spent(1.0), spent(2.0)),
            vec![crossing(
                BudgetLimit::CostUsd,
                Amount::Dollars(Usd::parse("2.5").unwrap()),
                Amount::Dollars(Usd::parse("2").unwrap())
            )]
        );
    }

    #[test]
    fn input_and_output_limits_refuse_on_their_own_count() {
        let b = Budget::parse(["input_tokens=500", "output_tokens=100"], false).unwrap();
        let at = |input_tokens, output_tokens| Spent {
            input_tokens,
            output_tokens,
            tokens: input_tokens + output_tokens,
            ..Spent::default()
        };
        assert_eq!(b.refuses(at(400, 99), 100, Usd(0)), None);
        let why = b.refuses(at(401, 0), 100, Usd(0)).unwrap();
        assert!(why.contains("500 input tokens"), "{why}");
        let why = b.refuses(at(0, 100), 1, Usd(0)).unwrap();
        assert!(why.contains("100 output tokens"), "{why}");
        assert!(b
            .refuses_program(at(0, 100))
            .unwrap()
            .contains("output tokens"));
        assert_eq!(b.refuses_program(at(499, 99)), None);
        let raised = b.raised(Budget::parse(["output_tokens=+50"], true).unwrap());
        assert_eq!(raised.output_tokens, Some(150));
        assert_eq!(
            b.crossed(at(0, 0), at(0, 80)),
            vec![counted(BudgetLimit::OutputTokens, 100, 80)]
        );
    }

    #[test]
    fn a_trees_call_goes_waits_for_what_others_hold_or_is_refused_by_what_was_spent() {
        let b = Budget::parse(["tokens=1000", "model_calls=10"], false).unwrap();
        let ask = BudgetAsk {
            input_tokens: 100,
            tokens: 300,
            ..BudgetAsk::default()
        };
        let at = spent;
        assert_eq!(b.answer(at(500, 2), at(300, 1), &ask), TreeAnswer::Go);
        // Room beside what was spent, not beside what others hold.
        let wait = b.answer(at(500, 2), at(450, 2), &ask);
        assert!(matches!(wait, TreeAnswer::Wait { .. }), "{wait:?}");
        let wait = b.answer(at(100, 5), at(100, 5), &ask);
        assert!(
            matches!(wait, TreeAnswer::Wait { .. }),
            "calls held: {wait:?}"
        );
        // Spent already: refused whatever the others hold.
        let refused = b.answer(at(950, 2), at(0, 0), &ask);
        assert!(matches!(refused, TreeAnswer::Refused { .. }), "{refused:?}");
        // A dollar budget lets no unpriced call through.
        let dollars = Budget::parse(["cost_usd=1"], false).unwrap();
        let refused = dollars.answer(at(0, 0), at(0, 0), &ask);
        assert!(matches!(refused, TreeAnswer::Refused { .. }), "{refused:?}");
        let priced = BudgetAsk {
            priced: true,
            ..ask
        };
        assert_eq!(dollars.answer(at(0, 0), at(0, 0), &priced), TreeAnswer::Go);
    }

    #[test]
    fn a_warning_is_crossed_once_at_eighty_percent() {
        let b = tokens_and_calls(1000, 5);
        let at = spent;
        assert!(b.crossed(at(0, 0), at(799, 1)).is_empty());
        assert_eq!(
            b.crossed(at(700, 1), at(800, 2)),
            vec![counted(BudgetLimit::Tokens, 1000, 800)]
        );
        assert!(b.crossed(at(800, 2), at(900, 3)).is_empty(), "already past");
        assert_eq!(
            b.crossed(at(100, 3), at(200, 4)),
            vec![counted(BudgetLimit::ModelCalls, 5, 4)]
        );
        assert!(Budget::default()
            .crossed(at(0, 0), at(u64::MAX, u64::MAX))
            .is_empty());
    }

    fn crossing(limit: BudgetLimit, budget: Amount, spent: Amount) -> Crossing {
        Crossing {
            limit,
            budget,
            spent,
        }
    }

    fn counted(limit: BudgetLimit, budget: u64, spent: u64) -> Crossing {
        crossing(limit, Amount::Count(budget), Amount::Count(spent))
    }
}
