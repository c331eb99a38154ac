//! `docs/spec-coverage.md` names the tests that prove each clause of the promise as
//! `file::test`: every test it names that way must be in that file, so the list cannot point
//! at a test that moved or was renamed.

use std::path::{Path, PathBuf};

/// The workspace's root, two levels above this crate.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Each `path.rs::name` in backticks: the file as written and the test's name.
fn named_tests(list: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for quoted in list.split('`').skip(1).step_by(2) {
        let Some((path, name)) = quoted.split_once(".rs::") else {
            continue;
        };
        let plain_path = path
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-/".contains(c));
        let plain_name = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if plain_path && plain_name {
            found.push((format!("{path}.rs"), name.to_owned()));
        }
    }
    found
}

/// The file a listed path means: a crate's path (`wow-http/tests/http.rs`) is under
/// `crates/`, a bare `src/...` is wow-core's.
fn resolve(root: &Path, path: &str) -> Option<PathBuf> {
    [
        root.join("crates").join(path),
        root.join("crates/wow-core").join(path),
        root.join(path),
    ]
    .into_iter()
    .find(|candidate| candidate.is_file())
}

/// Whether `text` holds `name` as a whole word.
fn holds_word(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        !word(before) && !word(after)
    })
}

#[test]
fn every_test_the_coverage_list_names_is_in_the_file_it_names() {
    let root = workspace();
    let list = std::fs::read_to_string(root.join("docs/spec-coverage.md"))
        .unwrap_or_else(|error| panic!("docs/spec-coverage.md cannot be read: {error}"));
    let named = named_tests(&list);
    assert!(
        named.len() > 100,
        "only {} tests found in the list",
        named.len()
    );
    let mut stale = Vec::new();
    for (path, name) in &named {
        let held = resolve(&root, path)
            .and_then(|file| std::fs::read_to_string(file).ok())
            .is_some_and(|text| holds_word(&text, name));
        if !held {
            stale.push(format!("{path}::{name}"));
        }
    }
    assert!(
        stale.is_empty(),
        "docs/spec-coverage.md names tests its files do not hold:\n{}",
        stale.join("\n")
    );
}

#[test]
fn each_listed_test_has_a_line_of_its_own() {
    let list = std::fs::read_to_string(workspace().join("docs/spec-coverage.md"))
        .unwrap_or_else(|error| panic!("docs/spec-coverage.md cannot be read: {error}"));
    let crowded: Vec<&str> = list
        .lines()
        .filter(|line| named_tests(line).len() > 1)
        .collect();
    assert!(
        crowded.is_empty(),
        "lines naming more than one test:\n{}",
        crowded.join("\n")
    );
}
