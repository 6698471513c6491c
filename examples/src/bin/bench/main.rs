//! The benchmark: pgq's public API against a fresh database it creates and drops, with no-op
//! handlers. Prints one `name value` pair a line (see docs/performance.md).
//!
//! ```sh
//! cargo run --release -p pgq-examples --bin bench                         # the standard workload
//! cargo run --release -p pgq-examples --bin bench -- --processes 1,2,4    # drains by many processes
//! cargo run --release -p pgq-examples --bin bench -- --soak 600           # a steady load, a line a minute
//! cargo run --release -p pgq-examples --bin bench -- --observe 1          # with logs and metrics on
//! ```
//!
//! Flags are listed in `settings.rs`.

mod dashboard;
mod drain;
mod fleet;
mod measure;
mod raw_latency;
mod settings;
mod soak;
mod standard;
mod tasks;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{AssertSqlSafe, ConnectOptions, Connection};

use settings::{Mode, Settings};

/// What a mode returns.
type Outcome = Result<(), Box<dyn std::error::Error + Send + Sync>>;

#[tokio::main]
async fn main() -> Outcome {
    let settings = Settings::from_args(std::env::args().skip(1))?;
    if settings.observe > 0 {
        observe(settings.observe)?;
    }
    if let Mode::FleetWorker = settings.mode {
        // One process of a fleet drain, started by the benchmark itself on its database.
        return fleet::serve(&settings).await;
    }
    let url =
        std::env::var("DATABASE_URL").unwrap_or_else(|_| pgq_examples::DEFAULT_SERVER_URL.into());
    let server: PgConnectOptions = url.parse::<PgConnectOptions>()?.disable_statement_logging();
    let name = format!("pgq_bench_{}", std::process::id());
    let mut admin = server.connect().await?;
    sqlx::raw_sql(AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await?;
    // On a worker thread, as an application's request handlers run: a future polled by
    // `block_on` on the main thread is woken from a worker thread after every round trip.
    let options = server.clone().database(&name);
    let run = tokio::spawn(async move { run(&settings, options).await });
    let result = tokio::select! {
        joined = run => joined?,
        // Interrupted (Ctrl-C, or `kill` and `timeout`'s SIGTERM): the database is dropped all
        // the same (its history alone takes hundreds of megabytes); a fleet's worker processes
        // get the same signal.
        signal = interrupted() => Err(format!("{signal}; dropping {name}").into()),
    };
    sqlx::raw_sql(AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    )))
    .execute(&mut admin)
    .await?;
    admin.close().await?;
    result
}

/// The first of Ctrl-C and SIGTERM, by name.
async fn interrupted() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut terminate) = signal(SignalKind::terminate()) {
            return tokio::select! {
                _ = tokio::signal::ctrl_c() => "interrupted",
                _ = terminate.recv() => "terminated",
            };
        }
    }
    let _ = tokio::signal::ctrl_c().await;
    "interrupted"
}

/// What an observed application installs: a log subscriber at INFO (to stderr) and a metrics
/// recorder, here Prometheus's.
fn observe(what: u64) -> Outcome {
    if what != 3 {
        tracing_subscriber::fmt()
            .with_max_level(tracing_subscriber::filter::LevelFilter::INFO)
            .with_writer(std::io::stderr)
            .init();
    }
    if what != 2 {
        metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder()?;
    }
    Ok(())
}

async fn run(settings: &Settings, options: PgConnectOptions) -> Outcome {
    // A pool as `Client::connect` makes one: no ping before each use.
    let pool = PgPoolOptions::new()
        .max_connections(20)
        .test_before_acquire(false)
        .connect_with(options.clone())
        .await?;
    let client = pgq_core::Client::new(pool.clone());
    client.migrate().await?;
    match &settings.mode {
        Mode::Standard => standard::run(settings, &client).await?,
        Mode::Fleet(processes) => fleet::run(settings, &client, &options, processes).await?,
        Mode::Soak(seconds) => soak::run(settings, &client, *seconds).await?,
        Mode::FleetWorker => unreachable!("served before a database is made"),
    }
    if let Some(mib) = measure::peak_rss_mib() {
        println!("peak_rss_mib {mib:.1}");
    }
    pool.close().await;
    Ok(())
}
