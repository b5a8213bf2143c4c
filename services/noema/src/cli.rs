//! The `noema` command line: run Noema (all-in-one or one service per process), migrate,
//! inspect config and the registered services, and act as a client. It runs the services
//! of the [`Registry`] it is given, so a binary with one more registered service (see
//! `examples/service`) gets `up`, `serve`, `migrate`, backup and config for it through this
//! same code.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::builder::PossibleValuesParser;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use noema_runtime::config::ConfigLoader;
use noema_runtime::{NoemaConfig, Registry, shutdown, telemetry};

use crate::commands::{self, CommandError, connect::ClientFlags};
use crate::{Node, Role};

#[derive(Debug, Parser)]
#[command(
    name = "noema",
    version,
    about = "Noema: a self-hosted cognition substrate for autonomous agents",
    long_about = "Noema keeps agents' memory, identity and provenance: an immutable ledger, \
                  identities and signed diaries, continuity capsules, a governed orchestrator \
                  and a world kernel, as gRPC services with a REST gateway.\n\n\
                  Configuration is layered: defaults, then --config FILE (TOML), then \
                  NOEMA__SECTION__KEY environment variables, then command-line flags. \
                  `noema config dump` prints the result."
)]
struct Cli {
    /// TOML configuration file.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run every service and the REST gateway in one process on the embedded default
    /// (SQLite file per service and objects under --data-dir).
    Up(ServerFlags),
    /// Run the named services (and/or the gateway) in this process, with storage and peer
    /// endpoints from configuration: one service per process (or pod) in the split shape.
    Serve {
        /// Services to run.
        #[arg(required = true, value_name = "SERVICE")]
        services: Vec<String>,
        #[command(flatten)]
        flags: ServerFlags,
    },
    /// Apply database migrations for the named services (default: all) and exit.
    /// Safe to run from several processes at once.
    Migrate {
        /// Services to migrate. Default: every service.
        #[arg(value_name = "SERVICE")]
        services: Vec<String>,
        #[command(flatten)]
        flags: ServerFlags,
    },
    /// List the registered services: gRPC services, storage and the services each calls.
    Services {
        /// As JSON (what the deployment checks compare Helm values against).
        #[arg(long)]
        json: bool,
    },
    /// Back up the embedded default while it runs: a consistent snapshot of each service
    /// database (VACUUM INTO), the object tree and the owner token, with a manifest of
    /// every file's SHA-256. Split deployments use pg_dump and S3 versioning instead.
    Backup {
        /// New (or empty) directory to write the backup into.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        #[command(flatten)]
        flags: ServerFlags,
    },
    /// Restore a backup made by `noema backup` into an empty (or new) --data-dir, after
    /// checking every file against the manifest. Then start `noema up` on it.
    Restore {
        /// The backup directory (with manifest.json).
        #[arg(long, value_name = "DIR")]
        from: PathBuf,
        #[command(flatten)]
        flags: ServerFlags,
    },
    /// Configuration tools.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Generate an Ed25519 key for an agent (prints the public key and fingerprint).
    Keygen(commands::ledger::KeygenArgs),
    /// Show the system mode (RUNNING or STOPPED).
    Status(ClientFlags),
    /// Halt writes (reads continue). Needs ledger:admin.
    Stop {
        /// Recorded as who stopped it.
        #[arg(long, default_value = "human:cli")]
        actor: String,
        #[command(flatten)]
        client: ClientFlags,
    },
    /// Accept writes again. Needs ledger:admin.
    Resume {
        #[arg(long, default_value = "human:cli")]
        actor: String,
        #[command(flatten)]
        client: ClientFlags,
    },
    /// Store and read canonical objects.
    #[command(subcommand)]
    Canonical(commands::ledger::CanonicalCommand),
    /// Sign and record agent references.
    #[command(subcommand)]
    Reference(commands::ledger::ReferenceCommand),
    /// Ledger operations: export, import, reconcile, verify-audit.
    #[command(subcommand)]
    Ledger(commands::ledger::LedgerCommand),
    /// Measure a running instance (throughput and latency, as JSON).
    Bench(commands::bench::Bench),
    /// Signed diaries.
    #[command(subcommand)]
    Diary(commands::diary::DiaryCommand),
    /// Diary entries: create a draft, sign it locally, verify it.
    #[command(subcommand)]
    Entry(commands::diary::EntryCommand),
    /// Identity checks.
    #[command(subcommand)]
    Identity(commands::diary::IdentityCommand),
    /// Continuity capsules: upsert, patch, read, list, history, archive (JSON out).
    #[command(subcommand)]
    Continuity(commands::continuity::ContinuityCommand),
    /// Memory files (CogniRelay's /v1/write, /v1/read, /v1/append; JSON out).
    #[command(subcommand)]
    Memory(commands::memory::MemoryCommand),
    /// Search the tenant's memory files (term-based, best match first; JSON out).
    Search(commands::memory::SearchArgs),
    /// Shared tasks: create, update, query (JSON out).
    #[command(subcommand)]
    Tasks(commands::memory::TasksCommand),
    /// The tenant's peer registry: list, register, trust (JSON out).
    #[command(subcommand)]
    Peers(commands::coordination::PeersCommand),
    /// Handoffs between peers: create, get, query, consume (JSON out).
    #[command(subcommand)]
    Handoff(commands::coordination::HandoffCommand),
    /// Shared coordination state: create, get, history, query, update (JSON out).
    #[command(subcommand)]
    Shared(commands::coordination::SharedCommand),
    /// Reconciliations: open, get, query, resolve (JSON out).
    #[command(subcommand)]
    Reconcile(commands::coordination::ReconcileCommand),
    /// Direct messages: send, ack, pending, inbox, thread, verify (JSON out).
    #[command(subcommand)]
    Message(commands::message::MessageCommand),
    /// Context retrieval and snapshots: retrieve, snapshot, snapshot-get (JSON out).
    #[command(subcommand)]
    Context(commands::context::ContextCommand),
    /// The MCP endpoint as a client sees it.
    #[command(subcommand)]
    Mcp(commands::mcp::McpCommand),
    /// World kernel: create worlds, run turns, show states and diffs, verify history.
    #[command(subcommand)]
    World(commands::world::WorldCommand),
    /// World kernel components: store and read them by content hash.
    #[command(subcommand)]
    Component(commands::world::ComponentCommand),
    /// World kernel scenarios.
    #[command(subcommand)]
    Scenario(commands::world::ScenarioCommand),
    /// The world kernel's toys: a scripted LLM and the seed's toy sources.
    #[command(subcommand)]
    Toys(commands::toys::ToysCommand),
    /// Governed requests (the orchestrator): plan, risk, approve, execute, evaluate,
    /// reward, show, replay.
    #[command(subcommand)]
    Request(commands::orchestrator::RequestCommand),
    /// Requests waiting for approval, and since when.
    Approvals(commands::orchestrator::ApprovalsArgs),
    /// The release checklist.
    #[command(subcommand)]
    Release(commands::orchestrator::ReleaseCommand),
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Print the effective configuration (all layers applied) as TOML.
    Dump(ServerFlags),
}

/// Flags that override configuration (the last layer).
#[derive(Debug, Args, Clone, Default)]
struct ServerFlags {
    /// Directory for the embedded default's databases, objects and owner token
    /// [config: server.data_dir, default ./noema-data].
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// REST gateway address [config: server.http_addr, default 127.0.0.1:8080].
    #[arg(long, value_name = "ADDR")]
    http_addr: Option<String>,
    /// gRPC address of every service in this process [config: server.grpc_addr,
    /// default 127.0.0.1:50051].
    #[arg(long, value_name = "ADDR")]
    grpc_addr: Option<String>,
    /// Log format: text or json [config: telemetry.log_format].
    #[arg(long, value_name = "FORMAT")]
    log_format: Option<String>,
}

impl ServerFlags {
    fn apply(&self, mut loader: ConfigLoader) -> ConfigLoader {
        if let Some(dir) = &self.data_dir {
            loader = loader.set("server.data_dir", dir.display().to_string());
        }
        if let Some(addr) = &self.http_addr {
            loader = loader.set("server.http_addr", addr.clone());
        }
        if let Some(addr) = &self.grpc_addr {
            loader = loader.set("server.grpc_addr", addr.clone());
        }
        if let Some(format) = &self.log_format {
            loader = loader.set("telemetry.log_format", format.clone());
        }
        loader
    }
}

/// Writes to stdout; a closed pipe (e.g. `| head`) is not an error worth a panic.
fn say(text: &str) {
    let _ = writeln!(std::io::stdout(), "{text}");
}

fn fail(err: &dyn std::error::Error) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "error: {}", noema_core::ErrorChain(err));
    ExitCode::FAILURE
}

/// Exit status of a client command: 0, or 1 with the reason on stderr.
fn finish(result: Result<(), CommandError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => fail(&err),
    }
}

fn report_backup(
    result: Result<crate::backup::Manifest, crate::backup::BackupError>,
    what: &str,
    dir: &std::path::Path,
) -> ExitCode {
    match result {
        Ok(manifest) => {
            let bytes: u64 = manifest.files.iter().map(|f| f.size).sum();
            say(&format!(
                "{what} {} files ({bytes} bytes) to {}",
                manifest.files.len(),
                dir.display()
            ));
            ExitCode::SUCCESS
        }
        Err(err) => fail(&err),
    }
}

fn load(
    registry: &Registry,
    config: Option<&PathBuf>,
    flags: &ServerFlags,
) -> Result<NoemaConfig, noema_runtime::ConfigError> {
    flags
        .apply(ConfigLoader::new(registry).file(config.map(PathBuf::as_path)))
        .load()
}

/// The command line, with the service names `serve` and `migrate` accept (and list in their
/// help) taken from `registry`.
fn command(registry: &Registry) -> clap::Command {
    let roles = Role::names(registry);
    let services = registry.names();
    Cli::command()
        .mut_subcommand("serve", |serve| {
            serve.mut_arg("services", |arg| {
                arg.help("Services to run")
                    .value_parser(PossibleValuesParser::new(roles.clone()))
            })
        })
        .mut_subcommand("migrate", |migrate| {
            migrate.mut_arg("services", |arg| {
                arg.help("Services to migrate (default: all)")
                    .value_parser(PossibleValuesParser::new(services.clone()))
            })
        })
}

/// Runs the `noema` command line (from the process's arguments) for the services of
/// `registry`, and returns the process's exit status.
pub fn run(registry: Registry) -> ExitCode {
    // Every HTTP client of the process (tools, the bench) speaks TLS through ring.
    noema_tools::tls::install();
    let matches = command(&registry).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|err| err.exit());
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Command::Bench(bench) = &cli.command
        && let Some(threads) = bench.worker_threads()
    {
        runtime.worker_threads(threads);
    }
    match runtime.enable_all().build() {
        Ok(runtime) => runtime.block_on(dispatch(&registry, cli)),
        Err(err) => fail(&err),
    }
}

/// The roles named on the command line (already checked against the registry by clap).
fn roles(registry: &Registry, names: &[String]) -> Result<Vec<Role>, ExitCode> {
    names
        .iter()
        .map(|name| Role::parse(registry, name))
        .collect::<Result<_, _>>()
        .map_err(|err| {
            let _ = writeln!(std::io::stderr(), "error: {err}");
            ExitCode::FAILURE
        })
}

async fn dispatch(registry: &Registry, cli: Cli) -> ExitCode {
    match cli.command {
        Command::Up(flags) => {
            run_roles(registry, cli.config.as_ref(), &flags, &Role::all(registry)).await
        }
        Command::Serve { services, flags } => match roles(registry, &services) {
            Ok(roles) => run_roles(registry, cli.config.as_ref(), &flags, &roles).await,
            Err(code) => code,
        },
        Command::Migrate { services, flags } => match roles(registry, &services) {
            Ok(roles) => migrate(registry, cli.config.as_ref(), &flags, &roles).await,
            Err(code) => code,
        },
        Command::Services { json } => list_services(registry, json),
        Command::Backup { out, flags } => match load(registry, cli.config.as_ref(), &flags) {
            Ok(config) => report_backup(
                crate::backup::backup(registry, &config, &out).await,
                "backed up",
                &out,
            ),
            Err(err) => fail(&err),
        },
        Command::Restore { from, flags } => match load(registry, cli.config.as_ref(), &flags) {
            Ok(config) => report_backup(
                crate::backup::restore(registry, &config, &from).await,
                "restored",
                &config.server.data_dir,
            ),
            Err(err) => fail(&err),
        },
        Command::Keygen(args) => finish(commands::ledger::keygen(&args)),
        Command::Status(client) => finish(commands::ledger::status(&client).await),
        Command::Stop { actor, client } => {
            finish(commands::ledger::set_mode(&client, &actor, true).await)
        }
        Command::Resume { actor, client } => {
            finish(commands::ledger::set_mode(&client, &actor, false).await)
        }
        Command::Canonical(command) => finish(commands::ledger::canonical(&command).await),
        Command::Reference(command) => finish(commands::ledger::reference(&command).await),
        Command::Ledger(command) => finish(commands::ledger::ledger(&command).await),
        Command::Bench(command) => finish(commands::bench::bench(&command).await),
        Command::Diary(command) => finish(commands::diary::diary(&command).await),
        Command::Entry(command) => finish(commands::diary::entry(&command).await),
        Command::Identity(command) => finish(commands::diary::identity(&command).await),
        Command::Continuity(command) => finish(commands::continuity::continuity(&command).await),
        Command::Memory(command) => finish(commands::memory::memory(&command).await),
        Command::Search(args) => finish(commands::memory::search(&args).await),
        Command::Tasks(command) => finish(commands::memory::tasks(&command).await),
        Command::Peers(command) => finish(commands::coordination::peers(&command).await),
        Command::Handoff(command) => finish(commands::coordination::handoff(&command).await),
        Command::Shared(command) => finish(commands::coordination::shared(&command).await),
        Command::Reconcile(command) => finish(commands::coordination::reconcile(&command).await),
        Command::Message(command) => finish(commands::message::message(&command).await),
        Command::Context(command) => finish(commands::context::context(&command).await),
        Command::Mcp(command) => finish(commands::mcp::mcp(&command).await),
        Command::World(command) => finish(commands::world::world(&command).await),
        Command::Component(command) => finish(commands::world::component(&command).await),
        Command::Scenario(command) => finish(commands::world::scenario(&command).await),
        Command::Toys(command) => finish(commands::toys::toys(&command).await),
        Command::Request(command) => finish(commands::orchestrator::request(&command).await),
        Command::Approvals(args) => finish(commands::orchestrator::approvals(&args).await),
        Command::Release(command) => finish(commands::orchestrator::release(&command).await),
        Command::Config(ConfigCommand::Dump(flags)) => {
            match load(registry, cli.config.as_ref(), &flags).and_then(|c| c.to_toml()) {
                Ok(text) => {
                    say(text.trim_end());
                    ExitCode::SUCCESS
                }
                Err(err) => fail(&err),
            }
        }
    }
}

async fn run_roles(
    registry: &Registry,
    config_file: Option<&PathBuf>,
    flags: &ServerFlags,
    roles: &[Role],
) -> ExitCode {
    let config = match load(registry, config_file, flags) {
        Ok(config) => config,
        Err(err) => return fail(&err),
    };
    let telemetry = match telemetry::init(&config.telemetry) {
        Ok(guard) => guard,
        Err(err) => return fail(&err),
    };
    let code = serve(registry, &config, roles).await;
    // Flush pending spans (the guard's drop) off the async workers: the OTLP channel is
    // driven by this runtime, so blocking a worker on the flush could stall the flush.
    if let Err(err) = tokio::task::spawn_blocking(move || drop(telemetry)).await {
        let _ = writeln!(std::io::stderr(), "flushing telemetry failed: {err}");
    }
    code
}

async fn serve(registry: &Registry, config: &NoemaConfig, roles: &[Role]) -> ExitCode {
    let token = shutdown::on_signal();
    let node = match Box::pin(Node::start(registry, config, roles, token)).await {
        Ok(node) => node,
        Err(err) => {
            tracing::error!(error = %noema_core::ErrorChain(&err), "start-up failed");
            return fail(&err);
        }
    };
    if let Some(token) = &node.created_owner_token {
        say(&format!(
            "Owner token (shown once; saved to {} with mode 0600):\n  {token}",
            config.owner_token_path().display()
        ));
    }
    if let Some(addr) = node.http_addr {
        say(&format!("REST  http://{addr}"));
    }
    if let Some(addr) = node.grpc_addr {
        say(&format!("gRPC  {addr}"));
    }
    // Printed so that a metrics port of 0 (tests) can be read back like the others.
    if let Some(addr) = node.metrics_addr {
        say(&format!("metrics  http://{addr}/metrics"));
    }
    let names: Vec<&str> = roles.iter().map(|r| r.name()).collect();
    tracing::info!(services = ?names, "noema is serving; SIGTERM or Ctrl-C to stop");
    match node.wait().await {
        Ok(()) => {
            tracing::info!("stopped cleanly");
            ExitCode::SUCCESS
        }
        Err(err) => {
            tracing::error!(error = %noema_core::ErrorChain(&err), "stopped with an error");
            fail(&err)
        }
    }
}

async fn migrate(
    registry: &Registry,
    config_file: Option<&PathBuf>,
    flags: &ServerFlags,
    roles: &[Role],
) -> ExitCode {
    let config = match load(registry, config_file, flags) {
        Ok(config) => config,
        Err(err) => return fail(&err),
    };
    let roles: Vec<Role> = if roles.is_empty() {
        Role::all(registry)
            .into_iter()
            .filter(|r| r.is_grpc_service())
            .collect()
    } else {
        roles.to_vec()
    };
    for role in roles {
        match crate::node::migrate(registry, &config, role).await {
            Ok(Some(backend)) => say(&format!("{role}: migrations applied ({backend})")),
            Ok(None) => say(&format!("{role}: no database")),
            Err(err) => return fail(&err),
        }
    }
    ExitCode::SUCCESS
}

/// One registered service as `noema services --json` shows it.
#[derive(Debug, serde::Serialize)]
struct ServiceView {
    name: &'static str,
    /// Its gRPC services; the first is the one its readiness is reported under.
    grpc_services: &'static [&'static str],
    /// Every service has a database (`NOEMA__<NAME>__DATABASE_URL`).
    database: bool,
    object_store: bool,
    /// Services it calls (its peers, and the token authority).
    calls: Vec<&'static str>,
    /// It keeps the owner token (and checks every service's tokens).
    owner_token: bool,
    /// It takes service-specific settings in its configuration section.
    options: bool,
}

fn list_services(registry: &Registry, json: bool) -> ExitCode {
    let views: Vec<ServiceView> = registry
        .services()
        .map(|spec| ServiceView {
            name: spec.name,
            grpc_services: spec.grpc_services,
            database: true,
            object_store: spec.object_store.is_some(),
            calls: registry.calls(spec),
            owner_token: spec.token_authority.is_some(),
            options: spec.options.is_some(),
        })
        .collect();
    if json {
        return match serde_json::to_string_pretty(&views) {
            Ok(text) => {
                say(&text);
                ExitCode::SUCCESS
            }
            Err(err) => fail(&err),
        };
    }
    for view in views {
        let mut storage = vec!["database"];
        if view.object_store {
            storage.push("object store");
        }
        say(&format!(
            "{}\n  gRPC     {}\n  storage  {}\n  calls    {}",
            view.name,
            view.grpc_services.join(", "),
            storage.join(", "),
            if view.calls.is_empty() {
                "-".to_owned()
            } else {
                view.calls.join(", ")
            },
        ));
    }
    ExitCode::SUCCESS
}
