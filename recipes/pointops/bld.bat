:: Builds pointops into the host prefix on Windows (see build.sh for the variables used).
@echo on
setlocal EnableDelayedExpansion

:: nvcc needs 1-2 GB of memory per job: at most 4 jobs unless MAX_JOBS is given.
if not defined MAX_JOBS (
    set "MAX_JOBS=2"
    if defined CPU_COUNT set "MAX_JOBS=%CPU_COUNT%"
    if !MAX_JOBS! GTR 4 set "MAX_JOBS=4"
)

:: nvcc and the static CUDA runtime are in the build prefix; the headers in the host prefix.
:: cuda-nvcc's activation does not add the target include dir to the flags on Windows.
if "%POINTOPS_CUDA%"=="1" (
    set "CUDA_HOME=%BUILD_PREFIX%\Library"
    set "INCLUDE=%LIBRARY_INC%\targets\x64;%INCLUDE%"
)

:: A source tree copied from a developer checkout may hold objects of another configuration.
if exist build rmdir /s /q build
for /d %%D in (*.egg-info) do rmdir /s /q "%%D"

:: Distutils/setuptools use the MSVC that vs2022_win-64 activated (the CRT then comes from the
:: vc14_runtime/ucrt conda packages, not from a system VC++ redistributable).
set DISTUTILS_USE_SDK=1

"%PYTHON%" -m pip install . -vv --no-deps --no-build-isolation
if errorlevel 1 exit 1
