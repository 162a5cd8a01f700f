//! The `strata` command. This file only parses and dispatches; each
//! subcommand lives in its own module (`lab.rs`, …).

mod kv;
mod lab;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "strata",
    version,
    about = "strata: a versioned key-value engine built for direct I/O"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Measure strata against the device and peer engines.
    Lab(lab::LabArgs),
    /// Use a database: put, get, delete, scan, stats, flush (`strata db DIR put K V`).
    Db(kv::KvArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Lab(args) => lab::main(args),
        Command::Db(args) => kv::main("db", args),
    }
}
