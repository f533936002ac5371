//! Errors with the FAST specification's codes.
//!
//! Static errors (`S*`) come from a template set that cannot be used; dynamic errors (`D*`)
//! from a stream that does not agree with its templates; reportable errors (`R*`) from values
//! out of range. Every decode error carries the byte offset where it was found.

use std::fmt;

/// What went wrong while decoding or encoding, with the specification's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The buffer ended inside a value, a presence map or a message.
    Truncated(&'static str),
    /// \[D2\] an integer does not fit its field type (for example a uInt32 above 2^32-1).
    IntegerOverflow(&'static str),
    /// \[D4\] a dictionary entry holds a value of another type.
    DictionaryType,
    /// \[D5\] a mandatory field with copy, increment or tail and an undefined previous value
    /// has no initial value.
    NoInitialValue,
    /// \[D6\] a mandatory field's previous value is empty.
    EmptyPrevious,
    /// \[D7\] a subtraction length is larger than the base value.
    SubtractionTooLong,
    /// \[D9\] a template id names no known template.
    UnknownTemplate(u32),
    /// \[R1\] a decimal exponent outside -63..=63.
    ExponentRange,
    /// \[R2\] a unicode string is not valid UTF-8.
    InvalidUtf8,
    /// \[R4\] an integer overflowed while a delta or increment was applied.
    DeltaOverflow,
    /// \[R6\] an integer is encoded with more than 10 bytes (or 5 for 32-bit) or overlong.
    IntegerTooLong,
    /// \[R7\] a presence map is longer than this decoder supports (126 bits).
    PresenceMapTooLong,
    /// A sequence length larger than the bytes left could hold, or nesting deeper than allowed.
    LimitExceeded(&'static str),
    /// Encoder: the message record does not match the template at this field.
    RecordMismatch(&'static str),
}

impl ErrorKind {
    /// The FAST specification's code for this error, where it has one.
    pub fn code(&self) -> &'static str {
        match self {
            ErrorKind::Truncated(_) => "D-",
            ErrorKind::IntegerOverflow(_) => "D2",
            ErrorKind::DictionaryType => "D4",
            ErrorKind::NoInitialValue => "D5",
            ErrorKind::EmptyPrevious => "D6",
            ErrorKind::SubtractionTooLong => "D7",
            ErrorKind::UnknownTemplate(_) => "D9",
            ErrorKind::ExponentRange => "R1",
            ErrorKind::InvalidUtf8 => "R2",
            ErrorKind::DeltaOverflow => "R4",
            ErrorKind::IntegerTooLong => "R6",
            ErrorKind::PresenceMapTooLong => "R7",
            ErrorKind::LimitExceeded(_) => "D-",
            ErrorKind::RecordMismatch(_) => "E-",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Truncated(what) => write!(f, "buffer ends inside {what}"),
            ErrorKind::IntegerOverflow(ty) => write!(f, "[D2] value does not fit {ty}"),
            ErrorKind::DictionaryType => write!(f, "[D4] dictionary entry has another type"),
            ErrorKind::NoInitialValue => {
                write!(f, "[D5] mandatory field absent, previous value undefined and no initial value")
            }
            ErrorKind::EmptyPrevious => write!(f, "[D6] mandatory field's previous value is empty"),
            ErrorKind::SubtractionTooLong => {
                write!(f, "[D7] subtraction length longer than the base value")
            }
            ErrorKind::UnknownTemplate(id) => write!(f, "[D9] unknown template id {id}"),
            ErrorKind::ExponentRange => write!(f, "[R1] decimal exponent outside -63..=63"),
            ErrorKind::InvalidUtf8 => write!(f, "[R2] unicode string is not valid UTF-8"),
            ErrorKind::DeltaOverflow => write!(f, "[R4] integer overflow applying delta or increment"),
            ErrorKind::IntegerTooLong => write!(f, "[R6] integer encoding too long"),
            ErrorKind::PresenceMapTooLong => {
                write!(f, "[R7] presence map longer than 18 bytes (126 bits)")
            }
            ErrorKind::LimitExceeded(what) => write!(f, "limit exceeded: {what}"),
            ErrorKind::RecordMismatch(what) => write!(f, "record does not match template: {what}"),
        }
    }
}

/// A decode or encode error: what, where in the buffer, and in which field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    /// Byte offset in the buffer given to the decoder (or written by the encoder).
    pub offset: usize,
    /// Index of the field in [`crate::Program::fields`], `u32::MAX` when outside any field.
    pub field: u32,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, offset: usize) -> Error {
        Error { kind, offset, field: u32::MAX }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.kind, self.offset)
    }
}

impl std::error::Error for Error {}

/// A template set that cannot be used: which template, which field, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    /// The template's name (empty when the error is outside any template).
    pub template: String,
    /// The field's name (empty when the error is about the template itself).
    pub field: String,
    /// Why, starting with the specification's code where it has one (`[S4] ...`).
    pub reason: String,
}

impl TemplateError {
    pub(crate) fn new(template: &str, field: &str, reason: impl Into<String>) -> TemplateError {
        TemplateError { template: template.to_string(), field: field.to_string(), reason: reason.into() }
    }
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.template.is_empty(), self.field.is_empty()) {
            (true, _) => write!(f, "{}", self.reason),
            (false, true) => write!(f, "template {:?}: {}", self.template, self.reason),
            (false, false) => {
                write!(f, "template {:?}, field {:?}: {}", self.template, self.field, self.reason)
            }
        }
    }
}

impl std::error::Error for TemplateError {}
