//! `hpa-bridge config schema|reference`: the configuration file's JSON Schema and reference.

use clap::Subcommand;
use hpa_bridge_rules::config::Config;

#[derive(Subcommand, Debug)]
pub(crate) enum ConfigCommand {
    /// Print the JSON Schema (draft 2020-12) of the file `serve --config` reads.
    Schema,
    /// Print the configuration reference (docs/configuration.md), written from that schema.
    Reference,
}

/// Print what `command` asks for; the exit code.
pub(crate) fn main(command: ConfigCommand) -> i32 {
    match command {
        ConfigCommand::Schema => match serde_json::to_string_pretty(&Config::json_schema()) {
            Ok(text) => {
                println!("{text}");
                0
            }
            Err(e) => {
                eprintln!("error: {e}");
                1
            }
        },
        ConfigCommand::Reference => {
            print!(
                "{}",
                hpa_bridge::config_reference::render(&Config::json_schema())
            );
            0
        }
    }
}
