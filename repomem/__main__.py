from repomem.cli.main import entry

entry()
