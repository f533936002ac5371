//! Helpers the CLI tests share.
// Each test binary takes the helpers it needs.
#![allow(dead_code)]

use std::path::PathBuf;

/// A command line's words, split at spaces: one line per invocation, where a list of string
/// literals would take one line per word (the arguments hold no spaces).
pub fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// The project's root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `tickplant` command lines (their arguments) of the first `sh` block after `heading`
/// in the project's doc `doc` (`docs/feeds.md`); an empty heading: the doc's first block.
pub fn doc_commands(doc: &str, heading: &str) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(root().join(doc)).unwrap();
    let section = if heading.is_empty() {
        &text[..]
    } else {
        text.split(heading).nth(1).unwrap_or_else(|| panic!("{doc}: no {heading:?}"))
    };
    let block = section.split("```sh\n").nth(1).unwrap_or_else(|| panic!("{doc}: no sh block after {heading:?}"));
    let block = block.split("```").next().unwrap_or_default();
    block
        .lines()
        .filter_map(|l| l.strip_prefix("tickplant "))
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}
