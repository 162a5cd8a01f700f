//! The registry of the lab's experiments: [`ALL`], in the order a run takes
//! them (the device line first: the others compare with it), and lookup by
//! name for the command line and the report. One submodule per experiment
//! implements [`Experiment`]: its parameters, its run on the measurement
//! module it drives, its aims and its report section.
//!
//! Invariants: names are distinct; exactly one experiment measures the
//! device line, and it comes first. The submodules import the trait from
//! [`crate::experiment`], never this registry.

use anyhow::{bail, Result};

use crate::experiment::Experiment;

pub mod bulk;
pub mod device;
pub mod fio;
pub mod ingest;
pub mod io;
pub mod phases;
pub mod remote;

/// Every experiment, in the order a run takes them.
pub static ALL: [&dyn Experiment; 7] = [
    &device::Device,
    &io::Io,
    &ingest::Ingest,
    &bulk::Bulk,
    &fio::Fio,
    &phases::Phases,
    &remote::Remote,
];

/// The experiment named `name`, if the lab has one.
pub fn find(name: &str) -> Option<&'static dyn Experiment> {
    ALL.iter().copied().find(|e| e.name() == name)
}

/// [`find`], or an error listing the known names.
pub fn parse(name: &str) -> Result<&'static dyn Experiment> {
    match find(name) {
        Some(e) => Ok(e),
        None => bail!("unknown experiment {name:?}; known: {}", names().join(", ")),
    }
}

/// The names of [`ALL`], in order.
pub fn names() -> Vec<&'static str> {
    ALL.iter().map(|e| e.name()).collect()
}

/// Sort key of an experiment name (unknown names last).
pub fn order_of(name: &str) -> usize {
    ALL.iter()
        .position(|e| e.name() == name)
        .unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_and_the_device_line_comes_first() {
        let mut names = names();
        assert_eq!(
            names,
            ["device", "io", "ingest", "bulk", "fio", "phases", "remote"],
            "the run's order"
        );
        names.sort();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
        assert!(ALL[0].measures_device_line());
        assert_eq!(ALL.iter().filter(|e| e.measures_device_line()).count(), 1);
        assert_eq!(ALL[0].name(), crate::device::EXPERIMENT_NAME);
    }

    #[test]
    fn lookup_by_name() {
        assert_eq!(parse("bulk").unwrap().name(), "bulk");
        let err = parse("nope").unwrap_err().to_string();
        assert_eq!(
            err,
            "unknown experiment \"nope\"; known: device, io, ingest, bulk, fio, phases, remote"
        );
        assert!(order_of("device") < order_of("phases"));
        assert_eq!(order_of("nope"), usize::MAX);
    }

    #[test]
    fn every_experiment_plots_a_metric_it_has() {
        for e in ALL {
            let metrics = e.metrics();
            for key in e.plot_metrics() {
                assert!(metrics.iter().any(|m| m.key == *key), "{e:?}: {key}");
            }
        }
    }
}
