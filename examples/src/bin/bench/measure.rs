//! Small measuring tools.

use std::time::Duration;

/// Writes out dirty pages before a timed phase, as `floor.sh` does before each of its own, so
/// that neither pays for the other's leftovers. Needs a superuser (or `pg_checkpoint`); without
/// one the phases run as they are, as the output format has no place for a warning.
pub(crate) async fn checkpoint(pool: &sqlx::PgPool) {
    sqlx::raw_sql("CHECKPOINT").execute(pool).await.ok();
}

pub(crate) fn per_second(count: u64, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64()
}

/// The `q` quantile of `values`.
pub(crate) fn quantile(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    values[((values.len() - 1) as f64 * q).round() as usize]
}

/// Peak resident memory of this process, from the kernel.
pub(crate) fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// CPU time this process has used so far, all its threads, user and system, from the kernel
/// (in its clock ticks, a hundredth of a second each).
pub(crate) fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// The table's and its indexes' sizes, in MiB.
pub(crate) async fn sizes_mib(pool: &sqlx::PgPool) -> Result<(f64, f64), sqlx::Error> {
    let (table, indexes): (i64, i64) =
        sqlx::query_as("SELECT pg_table_size('pgq.jobs'), pg_indexes_size('pgq.jobs')")
            .fetch_one(pool)
            .await?;
    let mib = |bytes: i64| bytes as f64 / (1024.0 * 1024.0);
    Ok((mib(table), mib(indexes)))
}
