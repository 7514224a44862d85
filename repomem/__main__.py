from repomem.cli.launch import entry

entry()
