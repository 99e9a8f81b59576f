"""Jinja templates, one folder per output family; a package only so the installed fleetform finds them."""
