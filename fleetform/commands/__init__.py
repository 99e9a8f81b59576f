"""One module per `fleetform` subcommand; each has add_parser(subparsers) and sets args.run."""
