import sys

if "run" in sys.argv[1:2]:
    # Before the heavy imports: a stop asked for during start-up is kept, not fatal.
    from .stopsignal import listen_early

    listen_early()

from .cli import main

main()
