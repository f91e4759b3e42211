//! `rebill-transcode --resource NAME --from A --to B [--features F] [FILE]`: reads one document
//! of a resource written at version A (stdin without FILE) and writes it at version B. Response
//! documents are read leniently, request-only resources (the invoice refund) strictly. Invalid
//! input: exit status 1 and one line naming the element path.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use rebill_xml::{ApiVersion, Features, Mode, WireContext};

#[derive(Parser)]
#[command(name = "rebill-transcode", about = "Rewrite a rebill XML document for another API version")]
struct Args {
    /// Schema name of the resource (e.g. invoice).
    #[arg(long)]
    resource: String,
    /// Version the input is written at.
    #[arg(long)]
    from: String,
    /// Version to write.
    #[arg(long)]
    to: String,
    /// Site features, comma-separated (e.g. credit_memos).
    #[arg(long, default_value = "")]
    features: String,
    /// Scheme, host and port of hrefs.
    #[arg(long, default_value = "https://api.rebill.test")]
    base_url: String,
    /// Input file (stdin when absent).
    file: Option<PathBuf>,
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> anyhow::Result<String> {
    let features = Features::parse(&args.features)?;
    let from = WireContext::new(ApiVersion::parse(&args.from)?, features.clone(), &args.base_url);
    let to = WireContext::new(ApiVersion::parse(&args.to)?, features, &args.base_url);
    let info = rebill_models::RESOURCES.iter().find(|r| r.name == args.resource).ok_or_else(|| {
        let names: Vec<_> = rebill_models::RESOURCES.iter().map(|r| r.name).collect();
        anyhow::anyhow!("unknown resource `{}`; known resources: {}", args.resource, names.join(", "))
    })?;
    let input = match &args.file {
        Some(path) => std::fs::read(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?,
        None => {
            let mut buf = Vec::new();
            std::io::stdin().read_to_end(&mut buf)?;
            buf
        }
    };
    let mode = if info.request_only { Mode::Request } else { Mode::Response };
    match rebill_models::transcode(info.name, &input, &from, &to, mode) {
        Some(result) => result.map_err(|e| anyhow::anyhow!("invalid {} document: {e}", info.name)),
        None => anyhow::bail!("unknown resource `{}`", info.name),
    }
}
