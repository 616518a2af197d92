# Build the Windows installer: dist\mnemoscope\ (PyInstaller one-folder build with mnemoscope.exe
# and mnemoscope-cli.exe), a frozen self-test, dist\size-report.md and
# dist\Mnemoscope-<version>-windows-x64-setup.exe (Inno Setup 6).
# Run from anywhere:  powershell -ExecutionPolicy Bypass -File packaging\windows\build.ps1
$ErrorActionPreference = "Stop"
$PSNativeCommandUseErrorActionPreference = $true
Set-Location (Resolve-Path (Join-Path $PSScriptRoot "..\.."))

$venv = if ($env:MNEMOSCOPE_VENV) { $env:MNEMOSCOPE_VENV } else { ".venv" }
$py = Join-Path $venv "Scripts\python.exe"
if (-not (Test-Path $py)) { python -m venv $venv }
& $py -m pip install -q --upgrade pip
# torch first and exactly pinned (PyPI's Windows wheels are the CPU build).
& $py -m pip install -q -c constraints.txt "torch==2.13.0"
& $py -m pip install -q -c constraints.txt -e ".[package]"

$env:QT_QPA_PLATFORM = "offscreen"
$env:HF_HUB_OFFLINE = "1"
$version = (& $py -c "from app import __version__; print(__version__)").Trim()

# The model converted for OpenVINO (the bundle carries it instead of torch).
& $py packaging\export_model.py build\model-openvino
& $py -m PyInstaller --noconfirm --clean --log-level WARN `
    --workpath build\pyinstaller --distpath dist packaging\mnemoscope.spec

$cli = "dist\mnemoscope\mnemoscope-cli.exe"
& $cli --version
& $cli --self-test
& $py packaging\size_report.py dist\mnemoscope | Out-File -Encoding utf8 dist\size-report.md

$iscc = Join-Path ${env:ProgramFiles(x86)} "Inno Setup 6\ISCC.exe"
if (-not (Test-Path $iscc)) {
    choco install innosetup -y --no-progress
}
& $iscc /Q "/DAppVersion=$version" "/DBundleDir=$PWD\dist\mnemoscope" "/DOutputDir=$PWD\dist" `
    packaging\windows\mnemoscope.iss
Get-ChildItem dist\*.exe | ForEach-Object { "{0}  {1:N1} MB" -f $_.Name, ($_.Length / 1MB) }
