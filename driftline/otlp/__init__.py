"""OpenTelemetry traces of LLM and RAG services as inference events (docs/llm.md).

`spans`: OTLP bytes (protobuf or JSON) into bounded plain spans; `joining`: a request's spans gathered until its
trace is whole; `mapping`: one trace's spans into one contract event, its features the `descriptors` of the
prompt, the answer and the retrieval. Pure code: the receiver (receiver/otlp.py) serves it.
"""
