"""Builds the native batch walker of kafka_log_decoder (a plain CPython extension, no extra toolchain)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kafka_log_decoder._native",
            sources=["kafka_log_decoder/_native.c"],
            extra_compile_args=["-O3", "-std=c11", "-Wall", "-Wextra", "-fno-strict-aliasing"],
        )
    ]
)
