//! The HTTP guide (docs/http-api.md) and the OpenAPI document agree: every
//! operation of the document is in the guide's route list with each of its
//! query parameters, and every route the guide names is in the document
//! (the router and the document agree already: `api.rs`).

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `METHOD /path` of every operation of the document, with its query
/// parameters.
fn operations() -> Vec<(String, String, Vec<String>)> {
    let text = std::fs::read_to_string(root().join("docs/openapi.json")).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let mut ops = vec![];
    for (path, methods) in doc["paths"].as_object().unwrap() {
        for (method, op) in methods.as_object().unwrap() {
            let query = op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["in"] == "query")
                .filter_map(|p| p["name"].as_str().map(str::to_owned))
                .collect();
            ops.push((method.to_uppercase(), path.clone(), query));
        }
    }
    ops
}

/// The guide names an operation in full (`POST /v1/runs/{id}/retry`) or,
/// after a sibling, by its last segment (`, `/continue``).
fn named(guide: &str, method: &str, path: &str) -> bool {
    let last = path.rsplit('/').next().unwrap_or_default();
    guide.contains(&format!("{method} {path}")) || guide.contains(&format!("`/{last}`"))
}

#[test]
fn every_operation_of_the_document_is_in_the_guide_with_its_query() {
    let guide = std::fs::read_to_string(root().join("docs/http-api.md")).unwrap();
    let mut missing = vec![];
    for (method, path, query) in operations() {
        if !named(&guide, &method, &path) {
            missing.push(format!("{method} {path}"));
        }
        for q in query {
            if !guide.contains(&format!("{q}=")) {
                missing.push(format!("{method} {path}?{q}="));
            }
        }
    }
    assert!(missing.is_empty(), "not in docs/http-api.md: {missing:#?}");
}

#[test]
fn every_route_the_guide_names_is_in_the_document() {
    let guide = std::fs::read_to_string(root().join("docs/http-api.md")).unwrap();
    let known: BTreeSet<String> = operations()
        .into_iter()
        .map(|(m, p, _)| format!("{m} {p}"))
        .collect();
    let (mut unknown, mut seen) = (vec![], 0);
    for method in ["GET", "POST", "PUT", "PATCH", "DELETE"] {
        for (at, _) in guide.match_indices(&format!("`{method} /")) {
            // `METHOD /path` up to its closing backtick or its query.
            let rest = &guide[at + 1 + method.len() + 1..];
            let path = &rest[..rest.find(['`', '?']).unwrap_or(rest.len())];
            let route = format!("{method} {path}");
            seen += 1;
            if !known.contains(&route) {
                unknown.push(route);
            }
        }
    }
    assert!(seen >= 25, "only {seen} routes found in the guide");
    assert!(unknown.is_empty(), "not in docs/openapi.json: {unknown:#?}");
}
