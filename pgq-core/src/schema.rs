//! The name of the schema pgq lives in: `pgq` unless a client chooses another, checked once so
//! that it can be written into statements as a quoted identifier.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::limits;

/// A checked schema name: 1 to [`MAX_SCHEMA_LEN`](limits::MAX_SCHEMA_LEN) lowercase ASCII
/// letters, digits and `_`, starting with a letter or `_`, and not `pg_…`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Schema(Arc<str>);

impl Default for Schema {
    fn default() -> Self {
        Self("pgq".into())
    }
}

impl Schema {
    pub(crate) fn new(name: &str) -> Result<Self> {
        let refuse = |reason: &'static str| {
            Err(Error::InvalidSchema {
                name: name.chars().take(80).collect(),
                reason,
            })
        };
        if name.is_empty() || name.len() > limits::MAX_SCHEMA_LEN {
            return refuse("a schema name has 1 to 48 characters");
        }
        if !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            return refuse("only lowercase ASCII letters, digits and '_' are allowed");
        }
        if name.starts_with(|c: char| c.is_ascii_digit()) {
            return refuse("a schema name starts with a letter or '_'");
        }
        if name.starts_with("pg_") {
            return refuse("names starting with pg_ are reserved by PostgreSQL");
        }
        Ok(Self(name.into()))
    }

    pub(crate) fn name(&self) -> &str {
        &self.0
    }

    pub(crate) fn as_arc(&self) -> &Arc<str> {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::Schema;

    #[test]
    fn plain_lowercase_names_are_accepted() {
        for name in ["pgq", "app_jobs", "_x", "q2", &"s".repeat(48)] {
            assert_eq!(Schema::new(name).unwrap().name(), name);
        }
    }

    #[test]
    fn names_that_would_need_care_are_refused() {
        let long = "s".repeat(49);
        for name in [
            "", "Jobs", "app-jobs", "a\"b", "a.b", "2jobs", "pg_jobs", "jöbs", "a b", &long,
        ] {
            assert!(Schema::new(name).is_err(), "{name:?}");
        }
    }
}
