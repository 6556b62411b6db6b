"""The rules, one module each; :mod:`reviewbot.registry` lists them."""
