def pytest_configure(config):
    config.addinivalue_line(
        "markers", "transformers_common: transformers' own ModelTesterMixin / ConfigTester suites run on our models")
    # marks transformers' suite uses for hardware we do not have; registered so they read as marks, not typos
    for mark in ("flash_attn_test", "flash_attn_3_test", "flash_attn_4_test", "torch_compile_test", "torch_export_test",
                 "generate", "is_training_test", "is_tensor_parallel_test", "is_pipeline_test"):
        config.addinivalue_line("markers", f"{mark}: used by transformers' common suite")
