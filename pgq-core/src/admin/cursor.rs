//! [`JobCursor`]: where the next page of a search starts.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};

/// Where the next page of a search starts: the last job a page returned (or, for a search
/// through the finished history, the edge of the ids it looked at). Pages are keyed on ids, not
/// offsets, so jobs enqueued while an operator pages never shift or repeat what they see.
///
/// Its text form (`Display`, `FromStr`) is what scripts and the CLI pass back: the id, and for
/// a search in `run_at` order, `@` and that time.
///
/// ```
/// use pgq_core::JobCursor;
///
/// let cursor: JobCursor = "1234".parse().unwrap();
/// assert_eq!(cursor.to_string(), "1234");
/// assert!("12@2026-01-01T00:00:00Z".parse::<JobCursor>().is_ok());
/// assert!("twelve".parse::<JobCursor>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobCursor {
    pub(crate) id: i64,
    pub(crate) run_at: Option<DateTime<Utc>>,
}

impl JobCursor {
    pub(crate) fn id(id: i64) -> Self {
        Self { id, run_at: None }
    }

    pub(crate) fn run_at(id: i64, run_at: DateTime<Utc>) -> Self {
        Self {
            id,
            run_at: Some(run_at),
        }
    }
}

impl fmt::Display for JobCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.run_at {
            None => write!(f, "{}", self.id),
            Some(at) => write!(
                f,
                "{}@{}",
                self.id,
                at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
            ),
        }
    }
}

impl FromStr for JobCursor {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || {
            format!(
                "invalid cursor {}: expected an id, or id@time",
                crate::text::echoed(s)
            )
        };
        let (id, at) = match s.split_once('@') {
            Some((id, at)) => (id, Some(at)),
            None => (s, None),
        };
        let id = id.parse::<i64>().map_err(|_| invalid())?;
        match at {
            None => Ok(Self::id(id)),
            Some(at) => {
                let at = DateTime::parse_from_rfc3339(at).map_err(|_| invalid())?;
                Ok(Self::run_at(id, at.with_timezone(&Utc)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::JobCursor;

    #[test]
    fn the_text_form_round_trips() {
        for text in ["0", "42", "7@2026-11-24T00:56:00.123456Z"] {
            let cursor: JobCursor = text.parse().unwrap();
            assert_eq!(cursor.to_string(), text);
        }
        assert!("".parse::<JobCursor>().is_err());
        assert!("1@yesterday".parse::<JobCursor>().is_err());
    }
}
