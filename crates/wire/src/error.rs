use core::fmt;

/// What went wrong while reading a wire format, and where.
///
/// Small and `Copy` (after rustls): the variants name the field that failed with a static
/// string and the byte offset, relative to the start of the buffer handed to the parser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The buffer ends before `what` does: it needs `need` bytes from `offset`, `have` remain.
    Truncated { what: &'static str, offset: usize, need: usize, have: usize },
    /// A field holds a value the format does not allow.
    Malformed { what: &'static str, offset: usize, value: u64 },
    /// A valid value that this implementation does not handle.
    Unsupported { what: &'static str, offset: usize, value: u64 },
}

pub type Result<T> = core::result::Result<T, Error>;

impl Error {
    /// The byte offset the error refers to.
    pub fn offset(&self) -> usize {
        match *self {
            Error::Truncated { offset, .. } | Error::Malformed { offset, .. } | Error::Unsupported { offset, .. } => {
                offset
            }
        }
    }

    /// The same error with its offset moved by `base` (for an error found in an inner layer).
    #[must_use]
    pub fn at(self, base: usize) -> Self {
        match self {
            Error::Truncated { what, offset, need, have } => {
                Error::Truncated { what, offset: offset + base, need, have }
            }
            Error::Malformed { what, offset, value } => Error::Malformed { what, offset: offset + base, value },
            Error::Unsupported { what, offset, value } => Error::Unsupported { what, offset: offset + base, value },
        }
    }

    /// Short machine-friendly name of the error kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Truncated { .. } => "truncated",
            Error::Malformed { .. } => "malformed",
            Error::Unsupported { .. } => "unsupported",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::Truncated { what, offset, need, have } => {
                write!(f, "truncated {what} at byte {offset}: needs {need} bytes, {have} available")
            }
            Error::Malformed { what, offset, value } => {
                write!(f, "malformed {what} at byte {offset}: value {value:#x}")
            }
            Error::Unsupported { what, offset, value } => {
                write!(f, "unsupported {what} at byte {offset}: value {value:#x}")
            }
        }
    }
}

impl std::error::Error for Error {}

/// Check that `buf` holds `need` bytes from `offset`.
#[inline]
pub(crate) fn check(what: &'static str, buf: &[u8], offset: usize, need: usize) -> Result<()> {
    let have = buf.len().saturating_sub(offset);
    if have < need {
        Err(Error::Truncated { what, offset, need, have })
    } else {
        Ok(())
    }
}
