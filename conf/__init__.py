"""Run configurations and rule profiles (data only; a package so the wheel carries `profiles/*.yaml`)."""
