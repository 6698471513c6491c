//! [`JobId`]: the identity of one job row.

use std::fmt;
use std::num::ParseIntError;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The id of a job row (`pgq.jobs.id`).
///
/// pgq's ids come from an identity column that starts at 1, so every id pgq hands out is a
/// positive `i64`. It prints as that number ([`Display`](fmt::Display)), parses back from it
/// ([`FromStr`]), and is a plain JSON number with serde; parsing and deserializing refuse zero
/// and negative numbers, which name no job pgq made.
///
/// ```
/// use pgq_core::JobId;
/// let id = JobId::from(42);
/// assert_eq!(id.get(), 42);
/// assert_eq!(id.to_string(), "42");
/// assert_eq!("42".parse::<JobId>(), Ok(id));
/// assert_eq!(serde_json::to_string(&id).unwrap(), "42");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JobId(i64);

impl JobId {
    /// The number stored in the `id` column, for your own queries.
    ///
    /// ```no_run
    /// # async fn example(pool: sqlx::PgPool, id: pgq_core::JobId) -> Result<(), sqlx::Error> {
    /// sqlx::query("UPDATE orders SET export_job = $1 WHERE id = 42")
    ///     .bind(id.get())
    ///     .execute(&pool)
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn get(self) -> i64 {
        self.0
    }
}

impl From<i64> for JobId {
    fn from(id: i64) -> Self {
        Self(id)
    }
}

impl From<JobId> for i64 {
    fn from(id: JobId) -> Self {
        id.0
    }
}

/// The decimal number, as stored in the `id` column.
///
/// ```
/// let id = pgq_core::JobId::from(42);
/// assert_eq!(format!("/admin/jobs/{id}"), "/admin/jobs/42");
/// ```
impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Parses a decimal id, as [`Display`](fmt::Display) prints it: a whole number from 1 to
/// `i64::MAX`, an optional leading `+`, no spaces. Anything else is a [`ParseJobIdError`].
///
/// ```
/// use pgq_core::JobId;
///
/// // An id from a URL path or a command-line argument.
/// let id: JobId = "1234".parse().unwrap();
/// assert_eq!(id.get(), 1234);
///
/// let err = "12a".parse::<JobId>().unwrap_err();
/// assert_eq!(err.to_string(), r#"invalid job id "12a": not a whole number"#);
/// let err = "-3".parse::<JobId>().unwrap_err();
/// assert_eq!(err.to_string(), r#"invalid job id "-3": job ids start at 1"#);
/// ```
impl FromStr for JobId {
    type Err = ParseJobIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let error = |kind| ParseJobIdError {
            input: s.to_owned(),
            kind,
        };
        match s.parse::<i64>() {
            Ok(id) if id >= 1 => Ok(Self(id)),
            Ok(_) => Err(error(ParseErrorKind::NotPositive)),
            Err(source) => Err(error(ParseErrorKind::NotANumber(source))),
        }
    }
}

/// A plain number, as in the `id` column: `42`, not `"42"` or `{"id": 42}`.
///
/// ```
/// use pgq_core::JobId;
///
/// #[derive(serde::Serialize)]
/// struct Receipt { order_id: i64, job: JobId }
///
/// let receipt = Receipt { order_id: 7, job: JobId::from(42) };
/// assert_eq!(serde_json::to_string(&receipt).unwrap(), r#"{"order_id":7,"job":42}"#);
/// ```
impl Serialize for JobId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_i64(self.0)
    }
}

/// From a plain number, as [`Serialize`] writes it; zero and negative numbers are refused,
/// as by [`FromStr`]. A task may carry the id of another job this way.
///
/// ```
/// use pgq_core::JobId;
///
/// #[derive(serde::Deserialize)]
/// struct Retry { job: JobId }
///
/// let retry: Retry = serde_json::from_str(r#"{"job": 42}"#).unwrap();
/// assert_eq!(retry.job, JobId::from(42));
/// assert!(serde_json::from_str::<Retry>(r#"{"job": 0}"#).is_err());
/// assert!(serde_json::from_str::<Retry>(r#"{"job": "42"}"#).is_err());
/// ```
impl<'de> Deserialize<'de> for JobId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let id = i64::deserialize(deserializer)?;
        if id < 1 {
            return Err(serde::de::Error::invalid_value(
                serde::de::Unexpected::Signed(id),
                &"a job id, from 1",
            ));
        }
        Ok(Self(id))
    }
}

/// Why a string is not a [`JobId`]: it is not a whole number that fits an `i64`, or it is
/// below 1. The message quotes the input.
///
/// ```
/// use std::error::Error;
/// use pgq_core::{JobId, ParseJobIdError};
///
/// let err: ParseJobIdError = "seven".parse::<JobId>().unwrap_err();
/// assert_eq!(err.input(), "seven");
/// assert!(err.source().is_some()); // the integer parse error
///
/// let err = "0".parse::<JobId>().unwrap_err();
/// assert!(err.source().is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseJobIdError {
    input: String,
    kind: ParseErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum ParseErrorKind {
    NotANumber(ParseIntError),
    NotPositive,
}

impl ParseJobIdError {
    /// The text that was not a job id.
    ///
    /// ```
    /// let err = "".parse::<pgq_core::JobId>().unwrap_err();
    /// assert_eq!(err.input(), "");
    /// ```
    pub fn input(&self) -> &str {
        &self.input
    }
}

impl fmt::Display for ParseJobIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let reason = match self.kind {
            ParseErrorKind::NotANumber(_) => "not a whole number",
            ParseErrorKind::NotPositive => "job ids start at 1",
        };
        write!(
            f,
            "invalid job id {}: {reason}",
            crate::text::echoed(&self.input)
        )
    }
}

impl std::error::Error for ParseJobIdError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ParseErrorKind::NotANumber(source) => Some(source),
            ParseErrorKind::NotPositive => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::JobId;

    #[test]
    fn parses_what_display_prints() {
        for id in [1, 42, i64::MAX] {
            let id = JobId::from(id);
            assert_eq!(id.to_string().parse::<JobId>(), Ok(id));
        }
        assert_eq!("+7".parse::<JobId>(), Ok(JobId::from(7)));
    }

    #[test]
    fn refuses_what_is_no_job_id() {
        for input in [
            "",
            " 1",
            "1 ",
            "1.0",
            "0x10",
            "seven",
            "9223372036854775808",
        ] {
            let err = input.parse::<JobId>().unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("invalid job id {input:?}: not a whole number")
            );
        }
        for input in ["0", "-0", "-1", "-9223372036854775808"] {
            let err = input.parse::<JobId>().unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("invalid job id {input:?}: job ids start at 1")
            );
        }
    }

    #[test]
    fn serde_round_trips_a_plain_number() {
        let id = JobId::from(i64::MAX);
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, "9223372036854775807");
        assert_eq!(serde_json::from_str::<JobId>(&json).unwrap(), id);
        for bad in ["0", "-5", "\"5\"", "1.5", "null"] {
            assert!(serde_json::from_str::<JobId>(bad).is_err(), "{bad}");
        }
    }
}
