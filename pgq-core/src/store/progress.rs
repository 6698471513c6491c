//! Progress of running jobs, and the notification live watchers follow.

use crate::error::Result;
use crate::store::Store;
use crate::store::attempt::Fence;
use crate::store::run;
use crate::{limits, text};

const WRITE: &str = "
UPDATE pgq.jobs
SET progress = $4, current_stage = coalesce($5, current_stage),
    events_count = events_count + $6, updated_at = now()
WHERE id = $1 AND attempts = $2 AND worker_id = $3 AND status = 'running'
RETURNING pg_notify('pgq_progress', id::text)";

/// Writes an attempt's progress. `false` when the fence no longer holds. A stage the
/// database's encoding cannot hold is stored in ASCII.
pub(crate) async fn write(
    store: &Store,
    fence: Fence<'_>,
    percent: u8,
    stage: Option<&str>,
    events: i32,
) -> Result<bool> {
    match write_with(store, fence, percent, stage, events).await {
        Err(err) if err.is_untranslatable() => {
            let stage = stage.map(|stage| text::ascii(stage, limits::MAX_STAGE_BYTES));
            write_with(store, fence, percent, stage.as_deref(), events).await
        }
        written => written,
    }
}

async fn write_with(
    store: &Store,
    fence: Fence<'_>,
    percent: u8,
    stage: Option<&str>,
    events: i32,
) -> Result<bool> {
    run!(store, |conn| async {
        let row = sqlx::query(store.sql(WRITE))
            .persistent(store.prepared())
            .bind(fence.id.get())
            .bind(fence.attempt)
            .bind(fence.worker_id)
            .bind(i16::from(percent))
            .bind(stage)
            .bind(events)
            .fetch_optional(&mut *conn)
            .await?;
        Ok(row.is_some())
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_statement_renders() {
        crate::store::sql::assert_renders(&[super::WRITE]);
    }

    #[tokio::test]
    async fn no_plan_reads_the_whole_table() {
        crate::store::plans::assert_no_whole_table_reads(
            crate::store::plans::Connections::Application,
            &[("WRITE", super::WRITE, "")],
        )
        .await;
    }
}
