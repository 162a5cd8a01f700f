//! `strata db DIR put|get|delete|scan|stats|flush|sync-remote|compact …`: the engine
//! from the shell.
//!
//! Each command opens the database in DIR (creating it for `put`), does one
//! thing, and closes it, so every write it makes is durable (synced) when it
//! returns. Keys and values are taken as UTF-8 text; `--hex` reads and prints
//! them as hexadecimal instead. Failures are returned to `main`, which prints
//! them as one line; the one exit status decided here is `get`'s "not found".

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use strata::{Db, Options, WriteOptions};

use crate::stats;

#[derive(Args)]
pub struct KvArgs {
    /// The database directory.
    dir: PathBuf,
    /// Keys and values are hexadecimal (in and out).
    #[arg(long, global = true)]
    hex: bool,
    /// The database's remote store: s3://bucket/prefix (a build with the
    /// `s3` feature; endpoint, region and credentials from AWS_ENDPOINT_URL,
    /// AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), file:///dir or
    /// a path. A DIR that holds no database is restored from it.
    #[arg(long, global = true)]
    remote: Option<String>,
    /// Open DIR as a read-only follower of --remote: the database is the
    /// store's newest index, read from the store; DIR (empty, or a
    /// follower's own) is the follower's, and writes are refused.
    #[arg(long, global = true, requires = "remote")]
    follow: bool,
    /// Seconds an object no index lists any more stays in --remote before
    /// this writer deletes it (a follower that refreshes at least that
    /// often never finds a file gone); default 300. A process that ends
    /// sooner leaves them to the next writer's sweep.
    #[arg(long, global = true, requires = "remote", value_name = "SECS")]
    remote_deletion_delay: Option<u64>,
    #[command(subcommand)]
    command: KvCommand,
}

#[derive(Subcommand)]
enum KvCommand {
    /// Write KEY = VALUE (synced); prints the LSN.
    Put { key: String, value: String },
    /// Print the value of KEY (at --lsn, default newest); exit 1 if absent.
    Get {
        key: String,
        #[arg(long)]
        lsn: Option<u64>,
    },
    /// Delete KEY (a tombstone; synced); prints the LSN.
    Delete { key: String },
    /// Print `key<TAB>value` for keys in [--from, --to), at --lsn.
    Scan {
        #[arg(long)]
        from: Option<String>,
        #[arg(long)]
        to: Option<String>,
        #[arg(long)]
        lsn: Option<u64>,
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Print the engine's statistics (io counts are since this command's open).
    Stats {
        /// One JSON object with snake_case keys and sizes in bytes.
        #[arg(long)]
        json: bool,
    },
    /// Write the in-memory layers out as delta layers.
    Flush,
    /// Wait until the remote store (--remote) holds every write: flush,
    /// then upload what is missing and the index that lists it.
    SyncRemote,
    /// Flush, then merge every L0 layer into L1 runs. With --horizon, also
    /// write an image and drop the history it covers below that LSN (reads
    /// below it then fail with "below the horizon").
    Compact {
        /// Let history below this LSN go.
        #[arg(long)]
        horizon: Option<u64>,
    },
}

fn decode(text: &str, hex: bool) -> Result<Vec<u8>> {
    if !hex {
        return Ok(text.as_bytes().to_vec());
    }
    if !text.len().is_multiple_of(2) {
        bail!("{text:?} is not hexadecimal: odd length");
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&text[i..i + 2], 16)
                .with_context(|| format!("{text:?} is not hexadecimal"))
        })
        .collect()
}

fn encode(bytes: &[u8], hex: bool) -> String {
    if hex {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    } else {
        String::from_utf8_lossy(bytes).into_owned()
    }
}

pub fn main(command: &str, args: KvArgs) -> Result<ExitCode> {
    match run(command, args) {
        // The reader went away (`strata db DIR scan | head`): nothing to say.
        // Only stdout can be a pipe here; the engine's files never are.
        Err(error) if is_broken_pipe(&error) => Ok(ExitCode::SUCCESS),
        result => result,
    }
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn run(command: &str, args: KvArgs) -> Result<ExitCode> {
    let remote = match &args.remote {
        Some(url) => Some(
            strata::remote::Remote::from_url(url).with_context(|| format!("remote store {url}"))?,
        ),
        None => None,
    };
    let opts = Options {
        // With a remote store, an empty directory opens from it.
        create_if_missing: matches!(args.command, KvCommand::Put { .. }) || remote.is_some(),
        remote,
        remote_follower: args.follow,
        remote_deletion_delay: args.remote_deletion_delay.map_or(
            strata::REMOTE_DELETION_DELAY_DEFAULT,
            std::time::Duration::from_secs,
        ),
        ..Options::default()
    }
    // STRATA_IO_MODE / STRATA_IO_ENGINE choose the io mode of the CLI's
    // opens (the engine's `Db::open` takes its options as given).
    .with_env_overrides()?;
    let db =
        Db::open(&args.dir, opts).with_context(|| format!("opening {}", args.dir.display()))?;
    let hex = args.hex;
    let synced = WriteOptions { sync: true };
    // Buffered for long scans; a failed write (a closed pipe) is an error,
    // not println!'s panic.
    let mut out = BufWriter::new(std::io::stdout().lock());
    match args.command {
        KvCommand::Put { key, value } => writeln!(
            out,
            "{}",
            db.put(decode(&key, hex)?, decode(&value, hex)?, synced)?
        )?,
        KvCommand::Delete { key } => writeln!(out, "{}", db.delete(decode(&key, hex)?, synced)?)?,
        KvCommand::Get { key, lsn } => {
            let key = decode(&key, hex)?;
            let value = match lsn {
                Some(lsn) => db.get_at(&key, lsn)?,
                None => db.get(&key)?,
            };
            match value {
                Some(v) => writeln!(out, "{}", encode(&v, hex))?,
                None => {
                    db.close()?;
                    eprintln!("strata {command}: not found");
                    return Ok(ExitCode::FAILURE);
                }
            }
        }
        KvCommand::Scan {
            from,
            to,
            lsn,
            limit,
        } => {
            use std::ops::Bound;
            let start = from
                .map(|k| decode(&k, hex))
                .transpose()?
                .map_or(Bound::Unbounded, Bound::Included);
            let end = to
                .map(|k| decode(&k, hex))
                .transpose()?
                .map_or(Bound::Unbounded, Bound::Excluded);
            let lsn = lsn.unwrap_or_else(|| db.last_lsn());
            for item in db
                .scan_at((start, end), lsn)?
                .take(limit.unwrap_or(usize::MAX))
            {
                let (k, v) = item?;
                writeln!(out, "{}\t{}", encode(&k, hex), encode(&v, hex))?;
            }
        }
        KvCommand::Stats { json: true } => writeln!(out, "{}", stats::to_json(&db.stats())?)?,
        KvCommand::Stats { json: false } => stats::write_text(&mut out, &db.stats())?,
        KvCommand::Flush => db.flush()?,
        KvCommand::SyncRemote => {
            db.sync_remote()?;
            if let Some(r) = db.stats().remote {
                writeln!(
                    out,
                    "{} generation {} consistent_lsn {}",
                    r.url, r.generation, r.consistent_lsn
                )?;
            }
        }
        KvCommand::Compact { horizon } => {
            if let Some(lsn) = horizon {
                db.set_horizon(lsn);
            }
            db.compact()?
        }
    }
    out.flush()?;
    db.close()?;
    Ok(ExitCode::SUCCESS)
}
