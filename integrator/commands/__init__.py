"""One module per subcommand; `integrator.cli` discovers them."""
