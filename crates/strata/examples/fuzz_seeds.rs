//! Writes the seed corpus of every fuzz target: valid encodings produced by
//! the engine's own writers (`strata::fuzzing::Target::seeds`), one file per
//! seed, as `<dir>/<target>/valid-<name>`.
//!
//! ```text
//! cargo run -p strata --features fuzzing --example fuzz_seeds -- crates/strata/fuzz/seeds
//! ```
//!
//! Regression inputs (`crash-*`, from findings) live beside the valid seeds
//! and are left alone.

use std::path::PathBuf;

use strata::fuzzing::Target;

fn main() -> std::io::Result<()> {
    let dir: PathBuf = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/seeds")));
    for target in Target::ALL {
        let target_dir = dir.join(target.name());
        std::fs::create_dir_all(&target_dir)?;
        // Replace the valid seeds: a seed the generator no longer makes goes.
        for entry in std::fs::read_dir(&target_dir)? {
            let path = entry?.path();
            let is_valid_seed = path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("valid-"));
            if is_valid_seed {
                std::fs::remove_file(&path)?;
            }
        }
        let seeds = target.seeds();
        for (name, bytes) in &seeds {
            std::fs::write(target_dir.join(format!("valid-{name}")), bytes)?;
        }
        println!(
            "{}: {} seeds in {}",
            target.name(),
            seeds.len(),
            target_dir.display()
        );
    }
    Ok(())
}
