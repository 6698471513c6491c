//! [`Moment`]: a `timestamptz` read from one of pgq's tables, whatever SQL wrote there.

use chrono::{DateTime, TimeDelta, Utc};
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgRow, PgTypeInfo, PgValueFormat, PgValueRef};
use sqlx::{Decode, Postgres, Row, Type};

use crate::error::Result;

/// A time as chrono can hold it. PostgreSQL stores times chrono cannot (`infinity`,
/// `-infinity`, years past 262 143), and sqlx's own decoding panics on them: a hand-written
/// value would crash whatever read the row. `-infinity` reads as PostgreSQL's earliest time and
/// anything past chrono's latest as that, so that a `Moment` also binds back as a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Moment(pub(crate) DateTime<Utc>);

/// PostgreSQL counts time in microseconds from 2000-01-01 00:00:00 UTC.
const POSTGRES_EPOCH: i64 = 946_684_800;

/// 4714-11-24 00:00:00 BC, the earliest time PostgreSQL stores, in its microseconds.
const POSTGRES_EARLIEST: i64 = -211_813_488_000_000_000;

impl Moment {
    fn from_postgres_micros(micros: i64) -> Self {
        let epoch = DateTime::from_timestamp(POSTGRES_EPOCH, 0).unwrap_or(DateTime::UNIX_EPOCH);
        Moment(
            epoch
                .checked_add_signed(TimeDelta::microseconds(micros.max(POSTGRES_EARLIEST)))
                .unwrap_or(DateTime::<Utc>::MAX_UTC),
        )
    }
}

/// `t`, or PostgreSQL's earliest time if `t` is before it: a time PostgreSQL takes as a
/// parameter (chrono's reach before 4714 BC, PostgreSQL's goes past chrono's latest).
pub(crate) fn storable(t: DateTime<Utc>) -> DateTime<Utc> {
    t.max(Moment::from_postgres_micros(i64::MIN).0)
}

impl From<Moment> for DateTime<Utc> {
    fn from(moment: Moment) -> Self {
        moment.0
    }
}

impl Type<Postgres> for Moment {
    fn type_info() -> PgTypeInfo {
        <DateTime<Utc> as Type<Postgres>>::type_info()
    }

    fn compatible(ty: &PgTypeInfo) -> bool {
        <DateTime<Utc> as Type<Postgres>>::compatible(ty)
    }
}

impl<'r> Decode<'r, Postgres> for Moment {
    fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
        match value.format() {
            PgValueFormat::Binary => {
                let micros = <i64 as Decode<Postgres>>::decode(value)?;
                Ok(Self::from_postgres_micros(micros))
            }
            // Text comes only from the simple protocol; sqlx parses it without panicking.
            PgValueFormat::Text => Ok(Moment(<DateTime<Utc> as Decode<Postgres>>::decode(value)?)),
        }
    }
}

/// A time column of `row`, read as [`Moment`] reads it.
pub(crate) fn moment(row: &PgRow, column: &str) -> Result<DateTime<Utc>> {
    Ok(row.try_get::<Moment, _>(column)?.into())
}

/// A time column of `row` that may be NULL, read as [`Moment`] reads it.
pub(crate) fn maybe_moment(row: &PgRow, column: &str) -> Result<Option<DateTime<Utc>>> {
    Ok(row.try_get::<Option<Moment>, _>(column)?.map(Into::into))
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};

    use super::Moment;

    #[test]
    fn postgres_times_beyond_chronos_range_read_as_its_bounds() {
        assert_eq!(
            Moment::from_postgres_micros(i64::MAX).0,
            DateTime::<Utc>::MAX_UTC
        );
        assert_eq!(
            Moment::from_postgres_micros(i64::MIN).0.to_rfc3339(),
            "-4713-11-24T00:00:00+00:00"
        );
        assert_eq!(
            Moment::from_postgres_micros(0).0.to_rfc3339(),
            "2000-01-01T00:00:00+00:00"
        );
        assert_eq!(
            Moment::from_postgres_micros(-1).0.to_rfc3339(),
            "1999-12-31T23:59:59.999999+00:00"
        );
    }
}
