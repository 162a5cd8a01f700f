//! strata adapter. Filled in once `strata::Db` lands.

use std::path::Path;

use anyhow::{bail, Result};

use super::{Engine, EngineConfig};

pub fn open(_config: &EngineConfig, _dir: &Path) -> Result<Box<dyn Engine>> {
    bail!("strata::Db is not available yet in this build")
}
