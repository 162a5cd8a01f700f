//! The `strata` command. This file only parses, dispatches and reports
//! failures; each subcommand lives in its own module (`lab.rs`, `kv.rs`, …).
//!
//! A failure is printed as one line, `strata: <what>: <why>…`, on stderr
//! with exit status 1, never as a backtrace: `main` returns an `ExitCode`
//! instead of an error (whose Debug form, printed by the runtime, carries
//! a backtrace under `RUST_BACKTRACE`). clap prints its own usage errors
//! and exits 2.

mod inspect;
mod kv;
mod lab;
mod stats;

use std::process::ExitCode;

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
    /// Use a database: put, get, delete, scan, stats, flush, compact (`strata db DIR put K V`).
    Db(kv::KvArgs),
    /// Inspect a database directory, a MANIFEST or a layer file, read-only (--verify checks every block).
    Inspect(inspect::InspectArgs),
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Lab(args) => lab::main(args).map(|()| ExitCode::SUCCESS),
        Command::Db(args) => kv::main("db", args),
        Command::Inspect(args) => inspect::main(args).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("strata: {}", one_line(&error));
            ExitCode::FAILURE
        }
    }
}

/// anyhow's `{:#}` form (the causes joined with ": ") on one line. A cause
/// whose text its parent already holds is left out: the engine's I/O errors
/// print their source and also return it as `source()`, which would repeat
/// "No such file or directory (os error 2)". Line breaks inside a message
/// (a child process's output) become spaces, so stderr gets exactly one line.
fn one_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line.lines()
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}
