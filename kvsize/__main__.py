from kvsize.cli import main

main()
