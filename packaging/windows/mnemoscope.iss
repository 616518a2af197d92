; Inno Setup 6 script for the Windows installer of Mnemoscope.
; Built by packaging/windows/build.ps1 after PyInstaller has made dist\mnemoscope\:
;   ISCC.exe /DAppVersion=0.1.0 /DBundleDir=<repo>\dist\mnemoscope /DOutputDir=<repo>\dist mnemoscope.iss
; Installs per user or for all users (the wizard asks), adds a Start menu entry for the windowed
; mnemoscope.exe; mnemoscope-cli.exe in the same folder is the command line.

#ifndef AppVersion
  #error Pass /DAppVersion=<version> to ISCC
#endif
#ifndef BundleDir
  #define BundleDir "..\..\dist\mnemoscope"
#endif
#ifndef OutputDir
  #define OutputDir "..\..\dist"
#endif

[Setup]
AppId={{5B0D3C59-8E0B-4E55-9F0A-6D8C2A7E4F11}
AppName=Mnemoscope
AppVersion={#AppVersion}
AppVerName=Mnemoscope {#AppVersion}
AppPublisher=Mnemoscope developers
DefaultDirName={autopf}\Mnemoscope
DefaultGroupName=Mnemoscope
DisableProgramGroupPage=yes
PrivilegesRequired=lowest
PrivilegesRequiredOverridesAllowed=dialog
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
OutputDir={#OutputDir}
OutputBaseFilename=Mnemoscope-{#AppVersion}-windows-x64-setup
SetupIconFile=..\..\assets\icons\mnemoscope.ico
UninstallDisplayIcon={app}\mnemoscope.exe
Compression=lzma2
SolidCompression=yes
WizardStyle=modern

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked

[Files]
Source: "{#BundleDir}\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
Name: "{autoprograms}\Mnemoscope"; Filename: "{app}\mnemoscope.exe"
Name: "{autodesktop}\Mnemoscope"; Filename: "{app}\mnemoscope.exe"; Tasks: desktopicon

[Run]
Filename: "{app}\mnemoscope.exe"; Description: "{cm:LaunchProgram,Mnemoscope}"; Flags: nowait postinstall skipifsilent
