//! `hoard --generate`: man pages for hoard, its commands and its DwarFS
//! personalities, and shell completion scripts, all made from the same
//! clap definitions that parse the command lines.

use crate::args::{Cli, Generate, GenerateArgs, VERSION};
use anyhow::{bail, Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;
use std::path::Path;

/// Writes the man pages, or prints or writes the completion scripts.
pub fn run(args: &GenerateArgs) -> Result<u8> {
    let shell = match (args.what, &args.out) {
        (Generate::Man, Some(dir)) => return write_man_pages(dir).map(|()| 0),
        (Generate::Man, None) => bail!("--generate man needs --out DIR"),
        (Generate::CompleteBash, _) => Shell::Bash,
        (Generate::CompleteZsh, _) => Shell::Zsh,
        (Generate::CompleteFish, _) => Shell::Fish,
    };
    match &args.out {
        Some(dir) => write_completions(shell, dir).map(|()| 0),
        None => {
            clap_complete::generate(shell, &mut Cli::command(), "hoard", &mut std::io::stdout());
            Ok(0)
        }
    }
}

/// Writes the `shell` completion scripts of hoard and of each personality
/// into `dir`, each under the name that shell loads it by for its command
/// (`dwarfs` for bash, `_dwarfs` for zsh, `dwarfs.fish` for fish).
fn write_completions(shell: Shell, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create directory '{}'", dir.display()))?;
    let mut commands = vec![Cli::command()];
    commands.extend(crate::compat::personalities());
    for mut cmd in commands {
        let name = cmd.get_name().to_string();
        let file = match shell {
            Shell::Zsh => format!("_{name}"),
            Shell::Fish => format!("{name}.fish"),
            _ => name.clone(),
        };
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut cmd, &name, &mut script);
        let path = dir.join(file);
        write_whole(&path, &script)
            .with_context(|| format!("cannot write completion script '{}'", path.display()))?;
    }
    Ok(())
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
        .source(format!("hoard {}", VERSION));
    let path = dir.join(man.get_filename());
    let mut page = Vec::new();
    man.render(&mut page)?;
    write_whole(&path, &page).with_context(|| format!("cannot write man page '{}'", path.display()))
}

/// Writes `bytes` to `path` through a temporary file beside it, renamed
/// into place (mode 0644) when complete.
fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".hoard-")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
