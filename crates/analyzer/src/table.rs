//! A tidy table (one observation per row, one variable per column) written as CSV and as
//! Parquet with Polars, for pandas, R, DuckDB or Polars itself.

use std::path::Path;

use polars::prelude::*;

/// One column's values; `None` is a missing value (empty in CSV, null in Parquet).
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    /// Numbers.
    F64(Vec<Option<f64>>),
    /// Counts and ids.
    U32(Vec<u32>),
    /// Counts or codes that may be missing (e.g. an ECN codepoint a log did not record).
    OptU32(Vec<Option<u32>>),
    /// Text.
    Str(Vec<Option<String>>),
}

/// Errors of writing a table.
#[derive(Debug, thiserror::Error)]
#[error("write {path}: {message}")]
pub struct TableError {
    /// The file.
    pub path: String,
    /// What went wrong.
    pub message: String,
}

impl TableError {
    /// An error of writing `path`.
    pub(crate) fn of(path: &Path, message: impl ToString) -> Self {
        TableError {
            path: path.display().to_string(),
            message: message.to_string(),
        }
    }
}

/// `columns` (name, values; all of one length) as one frame; errors name `path`.
fn frame(columns: Vec<(&str, Values)>, path: &Path) -> Result<DataFrame, TableError> {
    let cols: Vec<Column> = columns
        .into_iter()
        .map(|(name, v)| match v {
            Values::F64(v) => Column::new(name.into(), v),
            Values::U32(v) => Column::new(name.into(), v),
            Values::OptU32(v) => Column::new(name.into(), v),
            Values::Str(v) => Column::new(name.into(), v),
        })
        .collect();
    DataFrame::new_infer_height(cols).map_err(|e| TableError::of(path, e))
}

/// `df` as Parquet (zstd) in `path`, written whole (a temporary name, then renamed: a reader
/// never sees half a file). Errors name the file.
pub fn write_parquet_frame(df: &mut DataFrame, path: &Path) -> Result<(), TableError> {
    let mut bytes = Vec::new();
    ParquetWriter::new(&mut bytes)
        .with_compression(ParquetCompression::Zstd(None))
        .finish(df)
        .map_err(|e| TableError::of(path, e))?;
    crate::files::write_atomic(path, &bytes).map_err(|e| TableError::of(path, e))
}

/// Writes `columns` (name, values; all of one length) to `csv` and `parquet` (zstd). Errors
/// name the file.
pub fn write(columns: Vec<(&str, Values)>, csv: &Path, parquet: &Path) -> Result<(), TableError> {
    let mut df = frame(columns, csv)?;
    let file = std::fs::File::create(csv).map_err(|e| TableError::of(csv, e))?;
    CsvWriter::new(file)
        .finish(&mut df)
        .map_err(|e| TableError::of(csv, e))?;
    write_parquet_frame(&mut df, parquet)
}

/// Writes `columns` (name, values; all of one length) to `parquet` alone (zstd), whole.
/// Errors name the file.
pub fn write_parquet(columns: Vec<(&str, Values)>, parquet: &Path) -> Result<(), TableError> {
    write_parquet_frame(&mut frame(columns, parquet)?, parquet)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_and_parquet_hold_the_same_rows() {
        let dir = std::env::temp_dir().join(format!("table-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (csv, pq) = (dir.join("t.csv"), dir.join("t.parquet"));
        write(
            vec![
                ("point", Values::U32(vec![1, 2])),
                ("scheme", Values::Str(vec![Some("cubic".into()), None])),
                ("tput", Values::F64(vec![Some(1.5), None])),
            ],
            &csv,
            &pq,
        )
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(&csv).unwrap(),
            "point,scheme,tput\n1,cubic,1.5\n2,,\n"
        );
        let df = ParquetReader::new(std::fs::File::open(&pq).unwrap())
            .finish()
            .unwrap();
        assert_eq!(df.shape(), (2, 3));
        assert_eq!(df.column("tput").unwrap().f64().unwrap().get(0), Some(1.5));
        assert_eq!(df.column("scheme").unwrap().null_count(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
