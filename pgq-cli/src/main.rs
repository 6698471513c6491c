//! `pgq`: apply pgq's schema, see its queues and workers, find jobs and act on them, pause and
//! resume queues, serve the web dashboard. Human tables by default, `--json` for scripts; exit
//! code 0 when done, 1 when something failed, 2 for a usage error, before anything was touched.

mod args;
mod cmd;
mod confirm;
mod connect;
mod failure;
mod filter_args;
mod output;
mod time_arg;

use std::io::Write as _;
use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Migrate(args) => cmd::migrate::run(&cli.global, args).await,
        Command::Stats => cmd::stats::run(&cli.global).await,
        Command::Jobs(jobs) => cmd::jobs::run(&cli.global, jobs).await,
        Command::Queues(queues) => cmd::queues::run(&cli.global, queues).await,
        Command::Workers => cmd::workers::run(&cli.global).await,
        Command::Web(args) => cmd::web::run(&cli.global, args).await,
        Command::Schedules => cmd::schedules::run(&cli.global).await,
    };
    match result {
        Ok(code) => code,
        Err(failure) => {
            let _ = writeln!(std::io::stderr(), "pgq: {failure}");
            failure.exit_code()
        }
    }
}
