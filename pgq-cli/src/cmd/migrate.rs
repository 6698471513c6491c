//! `pgq migrate`: apply the missing migrations; `--status` shows which the database has;
//! `--print-sql` prints them as scripts without connecting.

use std::process::ExitCode;

use pgq_core::Client;
use serde_json::json;

use crate::args::{Global, MigrateArgs};
use crate::connect;
use crate::failure::{Failure, Outcome};
use crate::output;

pub(crate) async fn run(global: &Global, args: &MigrateArgs) -> Outcome {
    if args.print_sql {
        return print_sql(global);
    }
    let client = connect::client(global).await?;
    if !args.status {
        let before = missing(&client).await?;
        client.migrate().await?;
        if global.json {
            output::json(&json!({ "applied": before }))?;
        } else if before.is_empty() {
            output::line(&format!("schema {} is up to date", global.schema))?;
        } else {
            output::line(&format!(
                "applied {} migrations to schema {}: {}",
                before.len(),
                global.schema,
                before.join(", ")
            ))?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let states = client.migration_states().await?;
    if global.json {
        let states: Vec<_> = states
            .iter()
            .map(|s| json!({ "version": s.version, "name": s.name, "applied_at": s.applied_at }))
            .collect();
        output::json(&json!(states))?;
    } else {
        let rows: Vec<Vec<String>> = states
            .iter()
            .map(|s| {
                vec![
                    s.version.to_string(),
                    s.name.to_owned(),
                    s.applied_at.map_or_else(
                        || "missing".into(),
                        |at| format!("applied {}", output::time(at)),
                    ),
                ]
            })
            .collect();
        output::table(&["version", "name", "state"], &rows)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The names of the migrations the database lacks.
async fn missing(client: &Client) -> Result<Vec<String>, Failure> {
    Ok(client
        .migration_states()
        .await?
        .into_iter()
        .filter(|state| state.applied_at.is_none())
        .map(|state| state.name.to_owned())
        .collect())
}

/// The scripts for the schema, with no database: a pool that never connects carries it.
fn print_sql(global: &Global) -> Outcome {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .connect_lazy_with(sqlx::postgres::PgConnectOptions::new());
    let client = Client::new(pool).with_schema(&global.schema)?;
    let migrations = client.migrations();
    if global.json {
        let scripts: Vec<_> = migrations
            .iter()
            .map(|m| json!({ "version": m.version, "name": m.name, "sql": m.sql }))
            .collect();
        output::json(&json!(scripts))?;
    } else {
        for migration in migrations {
            output::line(&migration.sql)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
