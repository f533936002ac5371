//! The types of template fields: a leaf module that the template reader and the value
//! parser both use.

/// The type of a scalar field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldType {
    UInt32,
    Int32,
    UInt64,
    Int64,
    Decimal,
    Ascii,
    Unicode,
    Bytes,
}

impl FieldType {
    pub fn name(self) -> &'static str {
        match self {
            FieldType::UInt32 => "uInt32",
            FieldType::Int32 => "int32",
            FieldType::UInt64 => "uInt64",
            FieldType::Int64 => "int64",
            FieldType::Decimal => "decimal",
            FieldType::Ascii => "string",
            FieldType::Unicode => "unicode",
            FieldType::Bytes => "byteVector",
        }
    }
    pub fn is_integer(self) -> bool {
        matches!(self, FieldType::UInt32 | FieldType::Int32 | FieldType::UInt64 | FieldType::Int64)
    }
    pub fn is_vector(self) -> bool {
        matches!(self, FieldType::Ascii | FieldType::Unicode | FieldType::Bytes)
    }
}
