"""Example blueprints and the blueprint JSON Schema; a package only so the installed fleetform finds them."""
