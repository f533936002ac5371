//! One Parquet file of flat columns, written with the `parquet` crate's own column writer
//! (not its arrow layer: arrow's crates doubled the build time of the research formats):
//! what `export parquet` and `export nautilus` write through.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use parquet::data_type::{ByteArray, ByteArrayType, FixedLenByteArray, FixedLenByteArrayType, Int32Type, Int64Type};
use parquet::errors::ParquetError;
use parquet::file::metadata::KeyValue;

/// A column's values, of the physical type its schema gives it.
#[derive(Debug)]
pub enum Values {
    I32(Vec<i32>),
    I64(Vec<i64>),
    Fixed(Vec<FixedLenByteArray>),
    Bytes(Vec<ByteArray>),
}

/// Write one file of one row group: `columns` in `schema`'s order, `meta` as the file's
/// key-value metadata (none when empty), zstd.
pub fn write_columns(
    path: &Path,
    schema: &str,
    meta: Vec<KeyValue>,
    columns: Vec<Values>,
) -> parquet::errors::Result<()> {
    let schema = Arc::new(parquet::schema::parser::parse_message_type(schema)?);
    let props = Arc::new(
        parquet::file::properties::WriterProperties::builder()
            .set_compression(parquet::basic::Compression::ZSTD(Default::default()))
            .set_key_value_metadata((!meta.is_empty()).then_some(meta))
            .build(),
    );
    let f = File::create(path).map_err(|e| ParquetError::General(format!("cannot create: {e}")))?;
    let mut w = parquet::file::writer::SerializedFileWriter::new(f, schema, props)?;
    let mut rg = w.next_row_group()?;
    let mut columns = columns.into_iter();
    while let Some(mut col) = rg.next_column()? {
        match columns.next() {
            Some(Values::I32(v)) => col.typed::<Int32Type>().write_batch(&v, None, None)?,
            Some(Values::I64(v)) => col.typed::<Int64Type>().write_batch(&v, None, None)?,
            Some(Values::Fixed(v)) => col.typed::<FixedLenByteArrayType>().write_batch(&v, None, None)?,
            Some(Values::Bytes(v)) => col.typed::<ByteArrayType>().write_batch(&v, None, None)?,
            None => return Err(ParquetError::General("more columns in the schema than values".into())),
        };
        col.close()?;
    }
    rg.close()?;
    w.close()?;
    Ok(())
}
