//! `hoard --generate`: man pages for hoard, its commands and its DwarFS
//! personalities, and shell completion scripts, all made from the same
//! clap definitions that parse the command lines.

use crate::args::Cli;
use anyhow::{bail, Context, Result};
use clap::{CommandFactory, ValueEnum};
use clap_complete::Shell;
use std::path::{Path, PathBuf};

/// What `--generate` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Generate {
    /// Man pages (hoard.1, hoard-create.1, ..., mkdwarfs.1, dwarfs.1,
    /// dwarfsck.1, dwarfsextract.1) into the --out directory.
    Man,
    /// A bash completion script, to standard output.
    CompleteBash,
    /// A zsh completion script, to standard output.
    CompleteZsh,
    /// A fish completion script, to standard output.
    CompleteFish,
}

/// `--generate WHAT [--out DIR]`.
#[derive(Debug)]
pub struct GenerateArgs {
    /// What to write.
    pub what: Generate,
    /// Where man pages go.
    pub out: Option<PathBuf>,
}

/// Writes the man pages or prints the completion script.
pub fn run(args: &GenerateArgs) -> Result<u8> {
    let shell = match (args.what, &args.out) {
        (Generate::Man, Some(dir)) => return write_man_pages(dir).map(|()| 0),
        (Generate::Man, None) => bail!("--generate man needs --out DIR"),
        (_, Some(_)) => {
            bail!("--out is for --generate man; completion scripts go to standard output")
        }
        (Generate::CompleteBash, None) => Shell::Bash,
        (Generate::CompleteZsh, None) => Shell::Zsh,
        (Generate::CompleteFish, None) => Shell::Fish,
    };
    clap_complete::generate(shell, &mut Cli::command(), "hoard", &mut std::io::stdout());
    Ok(0)
}

/// Writes one page for hoard, one for each of its commands and one for each
/// personality into `dir`.
fn write_man_pages(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create directory '{}'", dir.display()))?;
    // No page for the `help` command that clap adds.
    let mut hoard = Cli::command().disable_help_subcommand(true);
    hoard.build();
    write_pages(hoard, dir)?;
    for personality in crate::compat::personalities() {
        write_pages(personality, dir)?;
    }
    Ok(())
}

/// Writes the page of `cmd` and those of its subcommands.
fn write_pages(cmd: clap::Command, dir: &Path) -> Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub.clone(), dir)?;
    }
    let man = clap_mangen::Man::new(cmd)
        .date(env!("HOARD_DATE"))
        .manual("hoard")
        .source(format!("hoard {}", crate::VERSION));
    let path = dir.join(man.get_filename());
    let mut page = Vec::new();
    man.render(&mut page)?;
    std::fs::write(&path, page)
        .with_context(|| format!("cannot write man page '{}'", path.display()))
}
