//! The errors of the state machines' set-up and checks: small types that say what was
//! wrong and where, shared by the modules (a leaf module: it imports none of them).

use std::fmt;

/// A configuration value the library does not allow: the field (as the config names it)
/// and why; the message repeats the field, for a reader of the message alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidConfig {
    pub field: &'static str,
    pub reason: String,
}

impl InvalidConfig {
    pub fn new(field: &'static str, reason: impl Into<String>) -> Self {
        InvalidConfig { field, reason: reason.into() }
    }
}

impl fmt::Display for InvalidConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for InvalidConfig {}

/// A word that is not one of those a setting takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownName {
    /// What the word names (`protocol`, `action`).
    pub what: &'static str,
    pub name: String,
    /// The words it takes.
    pub expected: &'static str,
}

impl fmt::Display for UnknownName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown {} {:?}: expected {}", self.what, self.name, self.expected)
    }
}

impl std::error::Error for UnknownName {}

/// Text that does not read as what it should be (an endpoint, a date, a number): the text,
/// and what was expected of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadText {
    /// What the text should be (`endpoint`, `session date`).
    pub what: &'static str,
    pub text: String,
    pub expected: &'static str,
}

impl fmt::Display for BadText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad {} {:?}: expected {}", self.what, self.text, self.expected)
    }
}

impl std::error::Error for BadText {}

/// Counters that do not balance: which sum fails, with its numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unbalanced {
    pub sum: String,
}

impl fmt::Display for Unbalanced {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.sum)
    }
}

impl std::error::Error for Unbalanced {}
