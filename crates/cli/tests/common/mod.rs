//! Helpers the CLI tests share.

/// A command line's words, split at spaces: one line per invocation, where a list of string
/// literals would take one line per word (the arguments hold no spaces).
pub fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}
