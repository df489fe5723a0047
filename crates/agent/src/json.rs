//! Reading the data model from JSON with errors that say *where* the document is wrong.
//!
//! serde_json alone reports a line and column; for a stored event or a model's tool call the useful
//! part is the field path (`content.parts[0].function_call.name`), so every parse in the engine goes
//! through [`from_str`] / [`from_value`].

use serde::Deserialize as _;
use serde::de::DeserializeOwned;

/// A JSON document that does not match the data model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} at `{path}`: {message}")]
pub struct DataError {
    /// The type that was being read, such as `Event`.
    pub what: &'static str,
    /// The field path where reading failed; `.` for the document itself.
    pub path: String,
    /// serde's description of the problem.
    pub message: String,
}

fn short_type_name<T>() -> &'static str {
    let full = std::any::type_name::<T>();
    // Generic parameters are not useful in a user-facing message; the last path segment is.
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base)
}

fn to_data_error<T>(err: serde_path_to_error::Error<serde_json::Error>) -> DataError {
    DataError {
        what: short_type_name::<T>(),
        path: err.path().to_string(),
        message: err.into_inner().to_string(),
    }
}

/// Parses `text` as a `T`, naming the failing field on error.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, DataError> {
    // Tracking the path costs about a third of the parse; documents are almost always valid, so
    // the path is only worked out when plain parsing has already failed.
    if let Ok(value) = serde_json::from_str(text) {
        return Ok(value);
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let value = serde_path_to_error::deserialize(&mut de).map_err(to_data_error::<T>)?;
    // Trailing garbage after the document is malformed input too.
    de.end().map_err(|e| DataError {
        what: short_type_name::<T>(),
        path: ".".to_owned(),
        message: e.to_string(),
    })?;
    Ok(value)
}

/// Converts an already-parsed JSON value into a `T`, naming the failing field on error.
pub fn from_value<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, DataError> {
    if let Ok(parsed) = T::deserialize(&value) {
        return Ok(parsed);
    }
    serde_path_to_error::deserialize(value).map_err(to_data_error::<T>)
}

/// Reads `null` as the field's default, as Python's `None` is written for an unset `Optional`
/// list, map or flag; without this a document from user code would be rejected for saying "none".
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + serde::Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}
