"""A tiny GDN language model (random weights) whose GDN calls go through ``apply``."""
