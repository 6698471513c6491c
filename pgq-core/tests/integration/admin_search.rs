//! Finding jobs with the admin API: every filter, each order, keyset pages that stay stable
//! while jobs are enqueued, the window that bounds a search through the history, counts, and
//! filters refused before they reach the database.

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::Utc;
use pgq_core::{
    Client, EnqueueOptions, Error, Handler, JobContext, JobFilter, JobId, JobOrder, JobStatus,
    Task, TaskError, async_trait, limits,
};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};

use crate::support;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "search-a", unique_key = "found:{n}")]
struct Findable {
    n: u32,
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "search-b")]
struct AlsoFindable {
    n: u32,
}

#[async_trait]
impl Handler for Findable {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

#[async_trait]
impl Handler for AlsoFindable {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

/// Every job the filter matches, following its pages; checks that no job comes twice.
async fn all(client: &Client, filter: &JobFilter) -> Vec<JobId> {
    let mut filter = filter.clone();
    let mut ids = Vec::new();
    loop {
        let page = client.jobs(&filter).await.unwrap();
        ids.extend(page.jobs.iter().map(|job| job.id));
        match page.next {
            Some(next) => filter = filter.after(next),
            None => break,
        }
    }
    let distinct: BTreeSet<_> = ids.iter().collect();
    assert_eq!(distinct.len(), ids.len(), "a job came twice: {ids:?}");
    ids
}

async fn set(client: &Client, filter: JobFilter) -> BTreeSet<JobId> {
    all(client, &filter).await.into_iter().collect()
}

fn ids(list: &[JobId]) -> BTreeSet<JobId> {
    list.iter().copied().collect()
}

#[tokio::test]
async fn every_filter_finds_exactly_its_jobs() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let tagged = EnqueueOptions::default().tag("tenant", "acme");
    let a1 = client
        .enqueue_with(Findable { n: 1 }, tagged.clone())
        .await
        .unwrap()
        .id();
    let a2 = client.enqueue(Findable { n: 2 }).await.unwrap().id();
    let later = EnqueueOptions::default().delay(Duration::from_secs(3600));
    let b1 = client
        .enqueue_with(AlsoFindable { n: 1 }, later.tag("tenant", "globex"))
        .await
        .unwrap()
        .id();
    let b2 = client.enqueue(AlsoFindable { n: 2 }).await.unwrap().id();
    let b3 = client.enqueue(AlsoFindable { n: 3 }).await.unwrap().id();
    // Created a day ago, by hand, before it finishes (finished rows are never rewritten).
    sqlx::query("UPDATE pgq.jobs SET created_at = now() - interval '1 day' WHERE id = $1")
        .bind(a2.get())
        .execute(db.pool())
        .await
        .unwrap();
    support::put_in(
        db.pool(),
        a2,
        JobStatus::Failed,
        "SMTP 550: 100% Mailbox_full",
    )
    .await;
    support::put_in(db.pool(), b2, JobStatus::Running, "").await;
    support::put_in(db.pool(), b3, JobStatus::Completed, "").await;
    let now = Utc::now();
    let hour = chrono::Duration::hours(1);
    let everything = ids(&[a1, a2, b1, b2, b3]);

    assert_eq!(set(&client, JobFilter::new()).await, everything);
    let cases: Vec<(&str, JobFilter, BTreeSet<JobId>)> = vec![
        (
            "pending",
            JobFilter::new().status(JobStatus::Pending),
            ids(&[a1, b1]),
        ),
        (
            "running",
            JobFilter::new().status(JobStatus::Running),
            ids(&[b2]),
        ),
        (
            "finished",
            JobFilter::new().statuses([JobStatus::Completed, JobStatus::Failed]),
            ids(&[a2, b3]),
        ),
        (
            "pending or failed",
            JobFilter::new().statuses([JobStatus::Pending, JobStatus::Failed]),
            ids(&[a1, a2, b1]),
        ),
        ("task", JobFilter::new().task("Findable"), ids(&[a1, a2])),
        (
            "queue",
            JobFilter::new().queue("search-b"),
            ids(&[b1, b2, b3]),
        ),
        (
            "unique key",
            JobFilter::new().unique_key("found:2"),
            ids(&[a2]),
        ),
        ("ids", JobFilter::new().ids(a2..b2), ids(&[a2, b1])),
        (
            "ids inclusive",
            JobFilter::new().ids(a2..=b2),
            ids(&[a2, b1, b2]),
        ),
        ("ids from", JobFilter::new().ids(b2..), ids(&[b2, b3])),
        (
            "created before",
            JobFilter::new().created(..now - hour),
            ids(&[a2]),
        ),
        (
            "created since",
            JobFilter::new().created(now - hour..),
            ids(&[a1, b1, b2, b3]),
        ),
        (
            "run later",
            JobFilter::new().run_at(now + hour / 2..),
            ids(&[b1]),
        ),
        (
            "finished since",
            JobFilter::new().finished(now - hour..),
            ids(&[a2, b3]),
        ),
        (
            "finished later",
            JobFilter::new().finished(now + hour..),
            ids(&[]),
        ),
        (
            "error text",
            JobFilter::new().error_contains("mailbox"),
            ids(&[a2]),
        ),
        // `%` and `_` are plain characters, not wildcards.
        (
            "literal percent",
            JobFilter::new().error_contains("100% mailbox_"),
            ids(&[a2]),
        ),
        (
            "no wildcard",
            JobFilter::new().error_contains("1_0"),
            ids(&[]),
        ),
        ("tag", JobFilter::new().tag("tenant", "acme"), ids(&[a1])),
        (
            "other tag",
            JobFilter::new().tag("tenant", "globex"),
            ids(&[b1]),
        ),
        (
            "two tags",
            JobFilter::new().tag("tenant", "acme").tag("x", "y"),
            ids(&[]),
        ),
        (
            "combined",
            JobFilter::new()
                .queue("search-b")
                .status(JobStatus::Pending)
                .tag("tenant", "globex"),
            ids(&[b1]),
        ),
    ];
    for (name, filter, expected) in cases {
        assert_eq!(set(&client, filter.clone()).await, expected, "{name}");
        let count = client.count_jobs(&filter).await.unwrap();
        assert_eq!(count.count, expected.len() as u64, "{name}");
        assert!(count.exact, "{name}");
    }
}

#[tokio::test]
async fn each_order_pages_through_every_job() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let mut enqueued = Vec::new();
    for n in 0..7u32 {
        // Later jobs due sooner: run_at order is not id order.
        let delay = Duration::from_secs(u64::from(100 - n));
        let options = EnqueueOptions::default().delay(delay);
        enqueued.push(
            client
                .enqueue_with(AlsoFindable { n }, options)
                .await
                .unwrap()
                .id(),
        );
    }
    let newest = all(&client, &JobFilter::new().limit(3)).await;
    let mut expected = enqueued.clone();
    expected.reverse();
    assert_eq!(newest, expected);
    let oldest = all(&client, &JobFilter::new().order(JobOrder::Oldest).limit(3)).await;
    assert_eq!(oldest, enqueued);
    let soonest = JobFilter::new()
        .status(JobStatus::Pending)
        .order(JobOrder::RunAt)
        .limit(2);
    assert_eq!(all(&client, &soonest).await, expected);
    let page = client.jobs(&soonest).await.unwrap();
    let cursor = page.next.unwrap();
    // The cursor's text form, as scripts pass it back.
    let again = client
        .jobs(&soonest.clone().after(cursor.to_string().parse().unwrap()))
        .await
        .unwrap();
    assert_eq!(again.jobs[0].id, expected[2]);
}

#[tokio::test]
async fn pages_stay_stable_while_jobs_are_enqueued() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let first: Vec<JobId> = client
        .enqueue_many((0..25).map(|n| AlsoFindable { n }))
        .await
        .unwrap()
        .iter()
        .map(|e| e.id())
        .collect();
    for order in [JobOrder::Newest, JobOrder::Oldest] {
        let mut filter = JobFilter::new().order(order).limit(10);
        let mut seen = Vec::new();
        let mut more = 100;
        loop {
            let page = client.jobs(&filter).await.unwrap();
            seen.extend(page.jobs.iter().map(|job| job.id));
            // Other jobs arrive between pages.
            client
                .enqueue_many((more..more + 5).map(|n| AlsoFindable { n }))
                .await
                .unwrap();
            more += 5;
            match page.next {
                Some(next) => filter = filter.after(next),
                None => break,
            }
        }
        let distinct: BTreeSet<JobId> = seen.iter().copied().collect();
        assert_eq!(distinct.len(), seen.len(), "{order:?}: a job came twice");
        assert!(
            first.iter().all(|id| distinct.contains(id)),
            "{order:?}: a job was missed"
        );
        if order == JobOrder::Newest {
            // Newest first, jobs enqueued after the first page are never shown.
            assert_eq!(distinct, first.iter().copied().collect(), "{order:?}");
        }
    }
}

#[tokio::test]
async fn a_search_through_the_history_reads_a_window_of_ids_a_page() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let old = client.enqueue(AlsoFindable { n: 1 }).await.unwrap().id();
    support::put_in(db.pool(), old, JobStatus::Completed, "").await;
    // Three windows of ids that no job holds, then a newer job.
    let gap = 3 * limits::SEARCH_WINDOW + old.get();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "ALTER TABLE pgq.jobs ALTER COLUMN id RESTART WITH {gap}"
    )))
    .execute(db.pool())
    .await
    .unwrap();
    let new = client.enqueue(AlsoFindable { n: 2 }).await.unwrap().id();

    let history = JobFilter::new().task("AlsoFindable");
    let first = client.jobs(&history).await.unwrap();
    assert_eq!(
        first.jobs.iter().map(|job| job.id).collect::<Vec<_>>(),
        vec![new]
    );
    assert!(first.next.is_some(), "the older ids are still to be read");
    assert_eq!(all(&client, &history).await, vec![new, old]);
    let count = client.count_jobs(&history).await.unwrap();
    assert_eq!((count.count, count.exact), (1, false));
    // Oldest first walks the same windows the other way.
    let oldest = history.clone().order(JobOrder::Oldest);
    assert_eq!(all(&client, &oldest).await, vec![old, new]);
    // Active jobs are found through their own indexes, in one page.
    let pending = client
        .jobs(&history.clone().status(JobStatus::Pending))
        .await
        .unwrap();
    assert_eq!(pending.jobs.len(), 1);
    assert!(pending.next.is_none());
}

#[tokio::test]
async fn a_bad_filter_is_refused_before_the_database() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let too_long = "x".repeat(limits::MAX_ERROR_SEARCH_BYTES + 1);
    let bad = [
        JobFilter::new().limit(0),
        JobFilter::new().limit(limits::MAX_PAGE_SIZE + 1),
        JobFilter::new().queue("no spaces"),
        JobFilter::new().task(""),
        JobFilter::new().error_contains(too_long),
        JobFilter::new().error_contains(""),
        JobFilter::new().order(JobOrder::RunAt),
        JobFilter::new()
            .status(JobStatus::Failed)
            .order(JobOrder::RunAt),
        JobFilter::new().after("5@2026-01-01T00:00:00Z".parse().unwrap()),
        // PostgreSQL's text holds no NUL: no stored job has one, and the database would refuse
        // the statement rather than find nothing.
        JobFilter::new().task("Send\0Welcome"),
        JobFilter::new().unique_key("welcome:\0"),
        JobFilter::new().error_contains("a\0b"),
        JobFilter::new().tag("tenant\0", "acme"),
        JobFilter::new().tag("tenant", "ac\0me"),
        JobFilter::new().tag("tenant", "v".repeat(limits::MAX_TAG_VALUE_BYTES + 1)),
    ];
    // With a job in the table, so that a search would reach its statement.
    sqlx::query(
        "INSERT INTO pgq.jobs (task, queue, payload) VALUES ('SendWelcome', 'email', '{}')",
    )
    .execute(db.pool())
    .await
    .unwrap();
    for filter in bad {
        assert!(
            matches!(client.jobs(&filter).await, Err(Error::InvalidFilter(_))),
            "{filter:?}"
        );
        assert!(
            matches!(
                client.count_jobs(&filter).await,
                Err(Error::InvalidFilter(_))
            ),
            "{filter:?}"
        );
    }
}

/// Any range chrono holds searches: before, a start before 4714 BC (PostgreSQL's earliest)
/// failed with "timestamp out of range", and an inclusive end at chrono's latest panicked.
#[tokio::test]
async fn time_ranges_reaching_chronos_bounds_search() {
    use chrono::DateTime;
    use std::ops::Bound;

    let db = TestDatabase::new().await;
    let client = db.client();
    client.enqueue(Findable { n: 1 }).await.unwrap();
    let (earliest, latest) = (DateTime::<Utc>::MIN_UTC, DateTime::<Utc>::MAX_UTC);
    for (found, filter) in [
        (1, JobFilter::new().created(earliest..)),
        (1, JobFilter::new().created(..=latest)),
        (1, JobFilter::new().run_at(earliest..=latest)),
        (0, JobFilter::new().finished(earliest..latest)),
        (0, JobFilter::new().created(..earliest)),
        (
            0,
            JobFilter::new().created((Bound::Excluded(latest), Bound::Unbounded)),
        ),
    ] {
        let page = client.jobs(&filter).await.unwrap();
        assert_eq!(page.jobs.len(), found, "{filter:?}");
        assert_eq!(
            client.count_jobs(&filter).await.unwrap().count,
            found as u64,
            "{filter:?}"
        );
    }
}

/// `finished(..)` names finished jobs whatever its bounds: none at all, or an end past the
/// latest time, still leaves out every pending, claimed and running job, in a search and in an
/// action that reuses it.
#[tokio::test]
async fn a_finished_range_without_bounds_matches_only_finished_jobs() {
    use chrono::DateTime;

    let db = TestDatabase::new().await;
    let client = db.client();
    let pending = client.enqueue(Findable { n: 1 }).await.unwrap().id();
    for filter in [
        JobFilter::new().finished(..),
        JobFilter::new().finished(..=DateTime::<Utc>::MAX_UTC),
        JobFilter::new().status(JobStatus::Pending).finished(..),
    ] {
        assert!(set(&client, filter.clone()).await.is_empty(), "{filter:?}");
        assert_eq!(client.count_jobs(&filter).await.unwrap().count, 0);
        let cancelled = client.cancel_jobs(filter.clone()).await.unwrap();
        assert!(cancelled.changed.is_empty(), "{filter:?}: {cancelled:?}");
    }
    let job = client.job(pending).await.unwrap().unwrap();
    assert_eq!(job.status, JobStatus::Pending);
}

/// Every condition holds: a range or tag named again narrows; a queue named again replaces.
#[tokio::test]
async fn a_condition_named_again_narrows() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let acme = client
        .enqueue_with(
            Findable { n: 1 },
            EnqueueOptions::default().tag("tenant", "acme"),
        )
        .await
        .unwrap()
        .id();
    let globex = client
        .enqueue_with(
            Findable { n: 2 },
            EnqueueOptions::default().tag("tenant", "globex"),
        )
        .await
        .unwrap()
        .id();
    let none = BTreeSet::new();
    for filter in [
        JobFilter::new()
            .tag("tenant", "acme")
            .tag("tenant", "globex"),
        JobFilter::new().ids(acme..).ids(..acme),
    ] {
        assert_eq!(set(&client, filter.clone()).await, none, "{filter:?}");
    }
    // A second value of one tag is checked as the first.
    let nul = JobFilter::new().tag("tenant", "acme").tag("tenant", "a\0b");
    assert!(matches!(nul.validate(), Err(Error::InvalidFilter(_))));
    // A task or queue named again replaces the first.
    let requeued = JobFilter::new().queue("search-b").queue("search-a");
    assert_eq!(set(&client, requeued).await, BTreeSet::from([acme, globex]));
    let same_twice = JobFilter::new().tag("tenant", "acme").tag("tenant", "acme");
    assert_eq!(set(&client, same_twice).await, BTreeSet::from([acme]));
    let between = Utc::now() + chrono::Duration::hours(1);
    let created = JobFilter::new()
        .created(..between)
        .created(between - chrono::Duration::hours(2)..);
    assert_eq!(set(&client, created).await, BTreeSet::from([acme, globex]));
    let disjoint = JobFilter::new()
        .created(..between - chrono::Duration::hours(2))
        .created(between - chrono::Duration::hours(2)..);
    assert_eq!(set(&client, disjoint).await, none);
}

/// The count stops at its cap: exactly that many is an exact count, one more is not.
#[tokio::test]
async fn a_count_of_exactly_the_cap_is_exact() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let cap = limits::MAX_COUNT;
    client
        .enqueue_many((0..cap as u32).map(|n| AlsoFindable { n }))
        .await
        .unwrap();
    let all = JobFilter::new().queue("search-b");
    let count = client.count_jobs(&all).await.unwrap();
    assert_eq!((count.count, count.exact), (cap, true));
    client.enqueue(AlsoFindable { n: 0 }).await.unwrap();
    let count = client.count_jobs(&all).await.unwrap();
    assert_eq!((count.count, count.exact), (cap, false));
}

#[tokio::test]
async fn a_tag_with_an_empty_value_is_found_by_it() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let empty = client
        .enqueue_with(
            Findable { n: 1 },
            EnqueueOptions::default().tag("tenant", ""),
        )
        .await
        .unwrap()
        .id();
    client
        .enqueue_with(
            Findable { n: 2 },
            EnqueueOptions::default().tag("tenant", "acme"),
        )
        .await
        .unwrap();
    client.enqueue(Findable { n: 3 }).await.unwrap();
    assert_eq!(
        set(&client, JobFilter::new().tag("tenant", "")).await,
        ids(&[empty])
    );
}
