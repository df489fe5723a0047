//! Compiles the Python sandbox's component for the packages to ship (scripts/package runs it):
//! the app then loads the compiled copy instead of compiling on the user's machine.
//!
//!     precompile-python-sandbox COMPONENT OUT
//!
//! writes OUT (the compiled copy) and OUT.json (what it was compiled from, and its digest).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, bail};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [component, out] = args.as_slice() else {
        bail!("usage: precompile-python-sandbox COMPONENT OUT");
    };
    let (component, out) = (PathBuf::from(component), PathBuf::from(out));
    let started = Instant::now();
    let manifest =
        pysandbox::precompile::precompile(&component, &out, &pysandbox::Limits::default())
            .with_context(|| format!("compiling {} for shipping", component.display()))?;
    let size = std::fs::metadata(&out)
        .with_context(|| format!("reading {}", out.display()))?
        .len();
    eprintln!(
        "precompile-python-sandbox: wrote {} ({size} bytes, for {}) in {:.1} s",
        out.display(),
        manifest.target,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
