//! `ioshare sim`: run a built-in scenario or a scenario file in virtual time and print the report.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use crate::Found;
use ioshare_sim::scenarios::{self, Outcome};
use ioshare_sim::{svg, Simulation};

/// Arguments of `ioshare sim`.
#[derive(clap::Args)]
pub struct Args {
    /// A built-in scenario (see --list) or a scenario file (.toml).
    scenario: Option<String>,
    /// List the built-in scenarios.
    #[arg(long)]
    list: bool,
    /// Group weights in the scenario's group order, e.g. 200,100.
    #[arg(long, value_delimiter = ',')]
    weights: Option<Vec<u32>>,
    /// Virtual duration in seconds.
    #[arg(long)]
    seconds: Option<f64>,
    /// Seed of the run (same seed, same result).
    #[arg(long)]
    seed: Option<u64>,
    /// Run without any controller, for comparison.
    #[arg(long)]
    no_control: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Leave out the wall-clock fields, so the same scenario and seed print identical JSON.
    #[arg(long)]
    deterministic: bool,
    /// Write SVG charts (IOPS, latency, vrate over time; latency distributions) into this directory.
    #[arg(long, value_name = "DIR")]
    svg: Option<PathBuf>,
}

/// Runs `ioshare sim`.
pub fn run(args: Args) -> anyhow::Result<Found> {
    if args.list {
        for b in scenarios::all() {
            println!("{:<24} {}", b.name, b.about);
        }
        return Ok(Found::AsExpected);
    }
    if let Some(dir) = &args.svg {
        crate::chart_dir(dir)?;
    }
    let Some(name) = args.scenario.as_deref() else {
        bail!("give a scenario: a built-in name (ioshare sim --list) or a .toml file");
    };
    let mut outcome = if name.ends_with(".toml") || Path::new(name).is_file() {
        run_file(Path::new(name), &args)?
    } else {
        let builtin = scenarios::find(name)?;
        let opts = scenarios::Args {
            weights: args.weights.clone(),
            seconds: args.seconds,
            seed: args.seed,
            no_control: args.no_control,
        };
        (builtin.run)(&opts)?
    };
    if args.deterministic {
        outcome = outcome.deterministic();
    }
    if let Some(dir) = &args.svg {
        for (i, report) in outcome.runs.iter().enumerate() {
            let files = svg::write_charts(report, dir, &format!("{}-{}", slug(&report.scenario), i + 1))
                .with_context(|| format!("writing charts into {}", dir.display()))?;
            for f in files {
                eprintln!("wrote {}", f.display());
            }
        }
    }
    if args.json {
        println!("{}", outcome.to_json());
    } else {
        print!("{}", outcome.to_table());
    }
    Ok(if outcome.ok() { Found::AsExpected } else { Found::VerdictFailed })
}

fn run_file(path: &Path, args: &Args) -> anyhow::Result<Outcome> {
    let mut sc = Simulation::load(path)?;
    if let Some(w) = &args.weights {
        if w.len() != sc.groups.len() {
            bail!("{} has {} groups but {} weights were given", path.display(), sc.groups.len(), w.len());
        }
        for (g, w) in sc.groups.iter_mut().zip(w) {
            g.weight = *w;
        }
    }
    if let Some(s) = args.seconds {
        sc = sc.seconds(s);
    }
    if let Some(seed) = args.seed {
        sc.seed = seed;
    }
    if args.no_control {
        sc.controller = ioshare_sim::ControllerSpec::None;
    }
    let report = sc.run().with_context(|| format!("running {}", path.display()))?;
    Ok(Outcome { runs: vec![report], comparisons: Vec::new() })
}

fn slug(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect()
}
